"""tools/gpu_sweep.sh --budget/--resume and tools/gpu_check.sh, on this CPU-only machine.

The budget's plumbing is checked with CPU cells (the selection's `--device cpu` wins
over the script's `--device cuda`) whose cost a --costs file sets: a cell said to take
10,000 s is not started (no record, so no page: the script says so and exits 0);
`--resume` with a file that says 1 s measures it and only it, and writes the page. gpu_check.sh runs with GRADMEM_ALLOW_NO_GPU=1 (every
cuda cell `unavailable`) and a wheel made here, and writes its wall-time summary.
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from harness.frameworks.base import nvidia_device_nodes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [
    pytest.mark.skipif(nvidia_device_nodes(), reason="a GPU is here: the scripts would measure for real"),
    pytest.mark.slow,  # acceptance: each call installs gradmem into a directory of its own
]

CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
        "mode": "eager", "device": "cpu", "status": "ok"}


def costs(tmp_path, seconds):
    path = tmp_path / f"costs-{seconds}.jsonl"
    record = dict(CELL, provenance={"worker_wall_s": {"memory": seconds / 2, "time": seconds / 2}})
    path.write_text(json.dumps(record) + "\n")
    return path


def script(tmp_path, name, *args, **env):
    return subprocess.run(
        ["bash", os.path.join(REPO, "tools", name), *args],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHON": sys.executable, "GRADMEM_HOST_SITE": str(tmp_path / "site"),
             "GRADMEM_ALLOW_NO_GPU": "1", **env},
    )


def records(out):
    path = out / "cuda.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_cell_not_expected_to_fit_is_left_and_resume_measures_it(tmp_path):
    out = tmp_path / "out"
    selection = "--device cpu --size tiny --workload chained_dot --framework reference --repeat 1 --time-budget 0"
    proc = script(tmp_path, "gpu_sweep.sh", "--budget", "300", str(out),
                  GRADMEM_GPU_SWEEP_ARGS=f"{selection} --costs {costs(tmp_path, 10_000)}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "expected to fit 0 of 1 cells" in proc.stderr
    assert "1 cell(s) left for --resume (1 not started: not expected to end in time)" in proc.stderr
    assert records(out) == [] and "no records yet (no page)" in proc.stdout

    proc = script(tmp_path, "gpu_sweep.sh", "--resume", "--budget", "300", str(out),
                  GRADMEM_GPU_SWEEP_ARGS=f"{selection} --costs {costs(tmp_path, 1)}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resume: 0 cell(s) already" in proc.stderr and "expected to fit 1 of 1 cells" in proc.stderr
    (record,) = records(out)
    assert record["status"] == "ok" and record["device"] == "cpu"
    assert (out / "report" / "index.html").exists()

    proc = script(tmp_path, "gpu_sweep.sh", "--resume", "--budget", "300", str(out),
                  GRADMEM_GPU_SWEEP_ARGS=selection)
    assert proc.returncode == 0 and "resume: 1 cell(s) already" in proc.stderr
    assert len(records(out)) == 1  # nothing measured twice
    assert sorted(p.name for p in out.glob("schedule-*.jsonl")) == ["schedule-1.jsonl", "schedule-2.jsonl",
                                                                    "schedule-3.jsonl"]


def test_bad_options_are_refused_naming_the_valid_ones(tmp_path):
    proc = script(tmp_path, "gpu_sweep.sh", "--budget", "soon", str(tmp_path / "out"))
    assert proc.returncode == 2 and "a positive number of seconds" in proc.stderr
    proc = script(tmp_path, "gpu_sweep.sh", "--fast", str(tmp_path / "out"))
    assert proc.returncode == 2 and "valid: --budget SECONDS, --resume, OUT_DIR" in proc.stderr


def test_gpu_check_unpacks_the_carried_wheels_runs_the_budgeted_sweep_and_writes_the_summary(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "carried-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("carried/__init__.py", "WHERE = 'carried'\n")
    extra = tmp_path / "extra"
    proc = script(
        tmp_path, "gpu_check.sh",
        GRADMEM_GPU_WHEELS=str(wheels), GRADMEM_GPU_EXTRA=str(extra), OUT=str(tmp_path / "device-out"),
        GRADMEM_GPU_SWEEP_ARGS="--size tiny --workload chained_dot --framework reference,torch --mode eager,compiled",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "device-out" / "gpu"
    assert (extra / "carried" / "__init__.py").exists()
    assert {r["status"] for r in records(out)} == {"unavailable"} and len(records(out)) == 4
    summary = (out / "wall.txt").read_text()
    assert "budget 420 s, exit 0" in summary
    assert "script wall:" in summary and "cells recorded: 4 (4 unavailable)" in summary
    assert "schedule-1.jsonl: sweep wall" in summary
    assert (out / "report" / "index.html").exists() and (out / "gpu_sweep.log").exists()
