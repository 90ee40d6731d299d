"""tools/gpu_sweep.sh, the CUDA comparison's one command, on this CPU-only machine.

What can be checked without a GPU: it refuses to run without one (exit 2, saying why);
with GRADMEM_ALLOW_NO_GPU=1 it installs gradmem into a directory of its own without
touching the host's environment, runs the sweep (every cuda cell `unavailable` with the
reason, none crashing) and writes the page. The project's .venv plays the GPU host's
Python here: its frameworks stand in for the host's CUDA builds.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

from harness.frameworks.base import nvidia_device_nodes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "gpu_sweep.sh")

pytestmark = pytest.mark.skipif(nvidia_device_nodes(), reason="a GPU is here: the script would measure for real")


def sweep(tmp_path, **env):
    return subprocess.run(
        ["bash", SCRIPT, str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHON": sys.executable, "GRADMEM_HOST_SITE": str(tmp_path / "site"), **env},
    )


def freeze():
    return subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout


def test_without_a_gpu_it_stops_and_says_why(tmp_path):
    proc = sweep(tmp_path)
    assert proc.returncode == 2
    assert "no NVIDIA GPU" in proc.stderr and "make run" in proc.stderr
    assert not (tmp_path / "out" / "cuda.jsonl").exists()


@pytest.mark.slow  # acceptance: installs gradmem into a venv of its own
def test_it_installs_gradmem_apart_runs_the_cuda_cells_and_writes_the_page(tmp_path):
    before = freeze()
    proc = sweep(
        tmp_path,
        GRADMEM_ALLOW_NO_GPU="1",
        GRADMEM_GPU_SWEEP_ARGS="--size tiny --workload chained_dot --framework reference,torch,jax --mode eager,compiled",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert freeze() == before  # the host's environment is untouched
    assert glob.glob(str(tmp_path / "site" / "gradmem-*.dist-info"))  # gradmem went here

    out = tmp_path / "out"
    records = [json.loads(line) for line in (out / "cuda.jsonl").read_text().splitlines()]
    # one record per cell asked for: the workload x 3 frameworks x 2 modes (the
    # reference engine has no compiled mode: unavailable, saying so), all on cuda
    assert len(records) == 6 and {r["device"] for r in records} == {"cuda"}
    for record in records:
        assert record["status"] == "unavailable", record
        assert record["message"]
        assert record["provenance"]["versions"]  # exact versions, even for a cell that did not run
    torch_record = next(r for r in records if r["framework"] == "torch")
    assert torch_record["provenance"]["versions"]["torch"]
    assert (out / "report" / "index.html").stat().st_size > 0
