"""A release that does not load with today's NumPy: the newest era dependencies it loads with.

An environment pins NumPy (and SciPy for autograd) to the versions `.venv` has, so that
between two releases only the framework changes. An old release may not load with them
(autograd before 1.7 with NumPy 2's removed aliases; 2017's autograd with NumPy >= 1.24;
JAX before 0.4.x with NumPy 2). Then the environment is built again with each step of
`LADDER` in turn (newest first) until the framework loads, and its manifest says what
differs (`dependency_differs`): a figure of such a release is measured with other
NumPy/SciPy than its neighbours, and the release page says so.

"Loads" means gradmem's adapter loads in the environment (`adapter.load()`: the import
and the op set gradmem builds from it), checked in a fresh interpreter running this
checkout's harness (code_link.py). Only a failure whose last lines name NumPy or SciPy
climbs the ladder (`about_numpy`); any other is the release's `unavailable` reason at once.
"""

import os
import subprocess
import tempfile

from harness.frameworks.base import Unavailable
from harness.versions import code_link, install

#: (label, {distribution: requirement}) tried in order after the pinned versions fail to
#: load; a distribution not named keeps its pin. NumPy < 2 with a SciPy pip resolves for it
#: (NumPy 1.26, SciPy 1.15/1.16 on Python 3.11), then 2017's era (NumPy 1.24 removed
#: np.int: harness/frameworks/autograd.py ERA_2017_PINS). What a framework's release
#: needs besides in an era is its adapter's `era_requires`.
LADDER = (
    ("numpy<2", {"numpy": "numpy<2", "scipy": "scipy"}),
    ("numpy<1.24", {"numpy": "numpy<1.24", "scipy": "scipy<1.16"}),
)
LOAD_TIMEOUT_S = 300


class LoadFailed(Unavailable):
    """The framework installed but gradmem's adapter does not load with it."""


def relaxed(requirements, step, adds=()):
    """`requirements` with the pins `step` replaces, and `adds`: what the framework's
    release needs besides in that era (its adapter's `era_requires`, e.g. `future` for
    2017's autograd)."""
    _, replace = step
    out = []
    for requirement in requirements:
        dist = requirement.split("==")[0].split("<")[0].split(">")[0].strip()
        out.append(replace.get(dist, requirement))
    return out + [r for r in adds if r not in out]


def check_loads(adapter_name, python, paths=()):
    """Raise LoadFailed with Python's last lines unless the adapter loads under `python`."""
    workdir = tempfile.mkdtemp(prefix="gradmem-load-")
    try:
        env = code_link.worker_environment(dict(os.environ), workdir, paths)
        script = f"from harness import frameworks\nframeworks.get({adapter_name!r}).load()\nprint('loaded')\n"
        try:
            done = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env,
                                  timeout=LOAD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LoadFailed(f"{adapter_name} did not load within {LOAD_TIMEOUT_S} s") from None
        if done.returncode != 0 or "loaded" not in done.stdout:
            raise LoadFailed(f"{adapter_name} does not load (exit {done.returncode}); Python's last lines:\n"
                             + install.last_lines(done.stderr or done.stdout, 6, most=None))  # whole: about_numpy reads them
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def about_numpy(failure):
    """Whether Python's last lines name NumPy or SciPy (a removed alias, an ABI
    mismatch): only then is an older era tried. A release lacking an API gradmem's
    adapter uses (tinygrad 0.10's helpers without NUM_CPU_THREADS) fails at once."""
    text = str(failure).lower()
    return "numpy" in text or "scipy" in text


def differs(pinned, installed):
    """{dist: {"pinned": X, "installed": Y}} for every pin (`dist==X`) the environment
    does not have."""
    out = {}
    for requirement in pinned:
        if "==" not in requirement:
            continue
        dist, version = requirement.split("==", 1)
        version = version.lstrip("=")  # `dist===X` (an exact pin) too
        if installed.get(dist) and installed[dist] != version:
            out[dist] = {"pinned": version, "installed": installed[dist]}
    return out
