"""Every module of a built environment imports from valid bytecode, as in a fresh install.

A ``.pyc`` is valid for the source whose modification time and size its header
records. pip compiles each module at install; shared_files.py then replaces a source
that a sibling environment holds with the same bytes by a hard link to the sibling's
file, whose inode carries the *sibling's* modification time. Without this step the new
environment's bytecode of every linked source is stale: each worker compiles those
modules from source at import, and on a host with PYTHONDONTWRITEBYTECODE set (the
development box sets it) every worker does so again. That is not a framework's cost,
and it moves figures: compiling some 200 of the modules jax, jaxlib and NumPy import
leaves the heap in another state before the baseline, and jax
0.5.2's compiled tiny_nerf then reads 7.7 MiB retained where the same environment with
valid bytecode reads 9.4 (docs/releases.md, "Stale bytecode"). So after linking, every
stale or missing ``.pyc`` is compiled again with the environment's own interpreter
(``compileall`` rewrites only those: ~12 s for MLX's 789 linked sources, ~1 s when
all are valid), and the manifest says so (`RULE`).
"""

#: the manifest's ``bytecode`` once `command` ran: environments without it that link
#: files were built before this step and are refreshed when next taken into use
RULE = "compiled after linking"

_COMPILE_ALL = (
    "import compileall, sys\n"
    # quiet=1: errors only; workers=0: every core. A module that does not compile (a test
    # file written for another Python) is reported and skipped: not a failed build.
    "compileall.compile_dir(sys.argv[1], quiet=1, workers=0)\n"
)


def command(python, env_dir):
    """The command that compiles every stale or missing .pyc under `env_dir` with
    `python` (the environment's own: its bytecode's magic number), in place. -I: the
    host's PYTHON* variables (PYTHONDONTWRITEBYTECODE among them) do not apply. A new
    .pyc replaces the old file (a new inode), so a sibling that links the old one keeps
    it, and a process importing meanwhile reads the old or the new file whole."""
    return [python, "-I", "-c", _COMPILE_ALL, env_dir]

