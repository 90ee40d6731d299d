"""`python -m harness list`: workloads with sizes and sources, frameworks with versions
or the reason they are unavailable, modes, and devices probed in child processes."""

import json
import os
import subprocess
import sys

import pytest

from harness import frameworks, workloads
from harness.inventory import command as inventory
from harness.choices import SIZES
from harness.frameworks.base import Adapter

ROOT = os.path.dirname(os.path.dirname(__file__))


def run_list(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness", "list", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def test_workloads_are_described_with_sizes_sources_and_bounds():
    described = inventory.describe_workloads()
    assert [w["name"] for w in described] == list(workloads.NAMES)
    for w in described:
        module = workloads.get(w["name"])
        assert w["source"] == module.SOURCE and w["stresses"] == module.STRESSES
        assert list(w["sizes"]) == list(SIZES)
        assert w["bound_bytes_float32"]["paper"] == module.bound_bytes(module.SIZES["paper"], "float32")
        assert w["batch_axis"] == module.BATCH_AXIS and all(module.BATCH_AXIS in w["sizes"][s] for s in SIZES)


def test_no_probe_listing_is_fast_and_imports_no_framework():
    done = run_list("--no-probe", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [f["name"] for f in data["frameworks"]] == list(frameworks.NAMES)
    for f in data["frameworks"]:
        assert f["available"] or f["reason"]  # a reason whenever it cannot run
        if f["available"]:
            assert f["versions"] and f["modes"] and f["devices"] is None  # not probed
    # the parent of a sweep never imports a framework: neither does the listing
    code = "import sys, harness.inventory.command as l; l.describe_frameworks(probe=False); " \
           "print([m for m in ('torch', 'jax', 'tensorflow', 'pytensor', 'autograd') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_probe_finds_the_devices_in_a_child_process():
    found = inventory.run_probe("autograd")
    assert found["devices"] == ["cpu"] and found["import_s"] >= 0
    assert inventory.run_probe("reference")["devices"][0] == "cpu"


def test_text_listing_names_versions_modes_devices_and_unavailable_reasons(monkeypatch):
    real_get = frameworks.get

    class NotInstalled(Adapter):  # what a machine without TensorFlow sees
        name, module, distributions = "tensorflow", "a_module_that_is_not_installed", ("a-dist-not-installed",)

    monkeypatch.setattr(frameworks, "get", lambda name: NotInstalled() if name == "tensorflow" else real_get(name))
    monkeypatch.setattr(inventory, "run_probe", lambda name: {"devices": ["cpu"], "import_s": 0.5})
    text = inventory.format_listing({"workloads": inventory.describe_workloads(),
                                     "frameworks": inventory.describe_frameworks(probe=True)})
    assert "tensorflow: unavailable: a_module_that_is_not_installed is not installed (pip install 'gradmem[tensorflow]')" in text
    assert "chained_dot: " in text and "from HIPS autograd #219" in text
    assert "paper  D=1000 L=100 cols=1000  (bound 377.66 MiB)" in text  # (L - 1) D^2 float32
    assert "modes: eager, compiled (compiled = jax.jit" in text
    assert "devices: cpu (import + load 0.5 s)" in text


def test_a_failing_probe_makes_the_framework_unavailable_with_its_error(monkeypatch):
    monkeypatch.setattr(inventory, "run_probe", lambda name: {"error": "ImportError: libfoo.so"})
    rows = {f["name"]: f for f in inventory.describe_frameworks(probe=True)}
    assert rows["autograd"]["available"] is False
    assert rows["autograd"]["reason"] == "import failed: ImportError: libfoo.so"


@pytest.mark.slow  # acceptance: imports and probes every framework
def test_the_full_listing_runs():
    # every framework probed in its own child process, a few at a time
    done = run_list()
    assert done.returncode == 0, done.stderr
    for name in (*workloads.NAMES, *frameworks.NAMES):
        assert f"  {name}: " in done.stdout
    assert done.stdout.count("devices: cpu") == sum(
        1 for f in inventory.describe_frameworks(probe=False) if f["available"]
    )
