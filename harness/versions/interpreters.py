"""Other Pythons on this host, for a release the running one cannot install.

JAX 0.11 requires Python >= 3.12; a sweep run by Python 3.11 would record every newer
release `unavailable` although the host has a 3.12 beside it (pyenv, Debian's
python3.12, a uv-managed one). When pip refuses a release for its Requires-Python, the
environment is built with the Python found here, of those the release accepts, nearest
to the running one (fewest other differences: for `>=3.12` the oldest that admits it,
for `<3.11`, `harness releases --python`, the newest), and its name, manifest and
records say which (`jax-0.11.0-py3.12`, manifest `python`).

Where it looks, in order: $GRADMEM_PYTHONS (paths, os.pathsep-separated), then
python3.N on PATH and pyenv's versions; each is asked for its own version, so a pyenv
shim that has no such Python is skipped.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

#: pip's words for a release that needs another Python ("Ignored the following versions
#: that require a different python version: 0.11.0 Requires-Python >=3.12")
PIP_PYTHON_MISMATCH = "require a different python version"
MINORS = range(8, 16)


def needs_other_python(pip_output, version):
    """The Requires-Python of `version` when pip's output says it refused that release
    for it, else None."""
    for line in pip_output.splitlines():
        if PIP_PYTHON_MISMATCH not in line:
            continue
        # "ERROR: Ignored ... python version: 0.10.0 Requires-Python >=3.11; 0.11.0 Requires-Python >=3.12"
        # (the list starts after the message, not after "ERROR:": its first release counts too)
        for part in line.split(PIP_PYTHON_MISMATCH, 1)[-1].lstrip(" :").split(";"):
            found = re.match(r"\s*(\S+)\s+Requires-Python\s+(.+?)\s*$", part)
            if found and found.group(1) == version:
                return found.group(2)
    return None


def candidates():
    """Paths of Python interpreters to ask, the explicit ones first, duplicates once."""
    given = [p for p in os.environ.get("GRADMEM_PYTHONS", "").split(os.pathsep) if p]
    on_path = [shutil.which(f"python3.{minor}") for minor in MINORS]
    root = os.environ.get("PYENV_ROOT") or os.path.join(os.path.expanduser("~"), ".pyenv")
    pyenv = sorted(glob.glob(os.path.join(root, "versions", "3.*", "bin", "python3")))
    seen, out = set(), []
    for path in given + on_path + pyenv:
        if path and os.path.exists(path) and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            out.append(path)
    return out


def version_of(python):
    """(major, minor, micro) of the interpreter at `python`, or None if it does not run."""
    try:
        done = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:3])"],
                              capture_output=True, text=True, timeout=30)
        return tuple(int(x) for x in done.stdout.split()) if done.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def find(requires_python):
    """((path, "3.N.M") of the Python here nearest the running one's minor version (the
    older of two as near), other than that minor version, that `requires_python` (a PEP
    440 specifier) admits, or None when there is none; the versions looked at, for the
    error). Whether it can make a venv is learnt
    when the environment is built (its failure is pip's or venv's, with their lines)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return None, []
    running = sys.version_info[:2]
    looked, fitting = [], []
    for path in candidates():
        version = version_of(path)
        if version is None:
            continue
        text = ".".join(map(str, version))
        if text not in looked:
            looked.append(text)
        if version[:2] != running and spec.contains(text):
            fitting.append((version, path))
    if not fitting:
        return None, looked
    # nearest first: '<3.11' from 3.11 is 3.10, not the host's 3.6
    version, path = min(fitting, key=lambda found: (abs(found[0][1] - running[1]), found))
    return (path, ".".join(map(str, version))), looked
