"""gradmem installs and runs on Python 3.12 and 3.13, not only on the pinned 3.11.

A GPU host brings its own Python (3.12 on the hosts we target) with its own CUDA
builds, so the package must install there. Each test is a real install: gradmem's
wheel is built once from the checkout, then a fresh venv of that Python gets NumPy and
the wheel from the wheelhouse `make test` fills (tools/python_wheelhouse.sh; the test
itself needs no network), and commands run from a directory outside the checkout, so
the installed copy is what runs. (.venv's pip installs into the new venv through
`pip --python`: no ensurepip per venv.)
"""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # acceptance: venvs on Python 3.12 and 3.13, installs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEELHOUSE = os.path.join(sys.prefix, "wheelhouse")  # .venv/wheelhouse
VERSIONS = ("3.12", "3.13")


def find_python(version):
    """A working `pythonX.Y`: on PATH, else under pyenv's versions; None if there is none.
    (A pyenv shim is on PATH for every installed version but fails unless selected.)"""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", f"{version}*", "bin", f"python{version}")))
    for candidate in filter(None, candidates):
        ok = subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0
        if ok:
            return candidate
    return None


def run(cmd, cwd, timeout=300):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def gradmem_wheel(tmp_path_factory):
    """gradmem's wheel, built from the checkout (pure Python: one for every version)."""
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), REPO],
        cwd=out)
    (wheel,) = glob.glob(str(out / "gradmem-*.whl"))
    return wheel


@pytest.mark.parametrize("version", VERSIONS)
def test_gradmem_installs_and_measures_a_cell_on(version, gradmem_wheel, tmp_path):
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    tag = f"cp{version.replace('.', '')}"
    if not glob.glob(os.path.join(WHEELHOUSE, f"numpy-*-{tag}-*.whl")):
        pytest.skip(f"no NumPy wheel for Python {version} in {WHEELHOUSE} (make test fills it)")

    venv = tmp_path / "venv"
    run([python, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    py = str(venv / "bin" / "python")
    # pip checks the wheel's Requires-Python against the target interpreter
    run([sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-index",
         "--find-links", WHEELHOUSE, "numpy", gradmem_wheel], cwd=tmp_path)

    # Every module imports on this Python, the CUDA sections included (their imports
    # of torch/jax/cupy happen only when a cuda cell loads), from site-packages.
    where = run(
        [py, "-c", "import importlib, pkgutil, harness\n"
                   "for m in pkgutil.walk_packages(harness.__path__, 'harness.'):\n"
                   # the pytest plugin is loaded by pytest alone (its pytest11 entry point)
                   "    if not m.name.endswith(('__main__', 'pytest_plugin')): importlib.import_module(m.name)\n"
                   "print(harness.__file__)"],
        cwd=tmp_path,
    )
    assert str(venv) in where, f"harness was imported from {where.strip()}, not the install"

    listing = run([py, "-m", "harness", "list"], cwd=tmp_path)
    assert "reference" in listing and "chained_dot" in listing

    out = tmp_path / "r.jsonl"
    run([py, "-m", "harness", "run", "--workload", "chained_dot", "--framework", "reference,torch",
         "--size", "tiny", "--device", "cpu,cuda", "--repeat", "1", "--quiet", "--out", str(out)], cwd=tmp_path)
    records = {(r["framework"], r["device"]): r for r in map(json.loads, out.read_text().splitlines())}
    reference = records[("reference", "cpu")]
    assert reference["status"] == "ok", reference["message"]
    assert reference["provenance"]["python"].startswith(version + ".")
    assert reference["provenance"]["versions"]["gradmem"]  # the installed distribution
    # No framework in this venv: torch is a record that says how to get it, not a crash.
    assert records[("torch", "cpu")]["status"] == "unavailable"
    assert "gradmem[torch]" in records[("torch", "cpu")]["message"]
    assert records[("reference", "cuda")]["status"] == "unavailable"
