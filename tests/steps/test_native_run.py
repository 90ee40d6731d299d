"""Native steps measured end to end: `run`, `scale` and `diff` on a step file, a step that
raises beside a cell that does not, a framework the host lacks. The reference row's
steps need NumPy only, so these run in seconds; test_torch_step.py runs the torch
template."""

import argparse
import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import results
from harness.sweep import command as run_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One product per step: h = x @ w, (B, 1024) float32, freed when the step ends. Its
# bound is that product: the one array the step makes that grows with the batch.
PRODUCT = textwrap.dedent('''
    import numpy as np

    FRAMEWORK = "reference"
    SIZES = {"tiny": {"B": 256}, "small": {"B": 1024}}
    BATCH_AXIS = "B"

    def setup(cfg):
        rng = np.random.default_rng(0)
        return {"x": rng.standard_normal((cfg["B"], 256)).astype(cfg["dtype"]),
                "w": rng.standard_normal((256, 1024)).astype(cfg["dtype"])}

    def step(state):
        h = state["x"] @ state["w"]
        return float(h.sum())

    def bound_bytes(cfg):
        return cfg["B"] * 1024 * (4 if cfg["dtype"] == "float32" else 8)
''')
RAISES = PRODUCT.replace("    h = state", "    raise KeyError('w2')\n    h = state")


def write(tmp_path, text, name):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def harness(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def test_a_step_that_raises_is_one_error_line_and_the_sweep_goes_on(tmp_path):
    bad = write(tmp_path, RAISES, "bad_step.py")
    out = tmp_path / "r.jsonl"
    done = harness("run", "--workload", f"chained_dot,{bad}", "--framework", "reference", "--size", "tiny",
                   "--repeat", "1", "--time-budget", "0", "--out", str(out))
    assert done.returncode == 4, done.stderr  # some cells failed, the others were measured
    by_workload = {r["workload"].split("#")[0]: r for r in results.read_records(out)}
    assert by_workload["chained_dot"]["status"] == "ok"  # nothing else in the sweep lost
    failed = by_workload[bad]
    line = RAISES.splitlines().index("    raise KeyError('w2')") + 1
    assert failed["status"] == "error"
    assert failed["message"] == f"memory pass: native step bad_step: step() raised KeyError: 'w2' (bad_step.py line {line})"


def test_a_framework_the_host_lacks_is_an_unavailable_record(tmp_path, monkeypatch):
    from harness.frameworks.reference import ReferenceAdapter

    monkeypatch.setattr(ReferenceAdapter, "available", lambda self: (False, "numpy is not installed (pip install numpy)"))
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    out = tmp_path / "r.jsonl"
    args = parser.parse_args(["--workload", write(tmp_path, PRODUCT, "step.py"), "--framework", "reference",
                              "--size", "tiny", "--out", str(out), "--quiet"])
    assert run_command.main(args) == 0
    (record,) = results.read_records(out)
    assert (record["status"], record["message"]) == ("unavailable", "numpy is not installed (pip install numpy)")


def test_run_scale_and_diff_on_a_step(tmp_path):
    step = write(tmp_path, PRODUCT, "product_step.py")
    out = tmp_path / "s.jsonl"
    done = harness("scale", "--workload", step, "--framework", "reference", "--size", "tiny", "--batch", "256,1024",
                   "--out", str(out))
    assert done.returncode == 0, done.stderr
    records = {r["batch"]: r for r in results.read_records(out)}
    assert sorted(records) == [256, 1024] and all(r["status"] == "ok" for r in records.values())
    small, large = records[256], records[1024]
    assert small["step_kind"] == "native" and small["grad_check"].startswith("not applicable: native step")
    assert small["bound_bytes"] == 256 * 4096 and small["bound_source"] == "declared"
    assert set(small["peak_bytes"]) == {"total"}  # one opaque call: no phases made up
    # 768 more rows of the product, 4 KiB each: what the step peak grows by (RSS pages
    # of mmapped buffers: within 10 %)
    grew = large["peak_bytes"]["total"] - small["peak_bytes"]["total"]
    assert grew == pytest.approx(768 * 4096, rel=0.10)
    diff = harness("diff", str(out), "--a", "batch=256", "--b", "batch=1024", "--json")
    assert diff.returncode == 0, diff.stderr
    figures = json.loads(diff.stdout)
    assert "bound_bytes" in json.dumps(figures)
