"""torch 2.4.0-2.7.x keep every compiled graph's Inductor Scheduler alive through
`torch._inductor.metrics`' lists (docs/releases.md, PyTorch: what the compiled step
keeps; tools/torch_inductor_metrics.py). The torch the project pins fills them only
while the inductor_metrics log is on: turned on here, the same lists hold the same
Schedulers, and the tool's switch keeps them empty."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*flags):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_inductor_metrics.py"), "chained_dot",
                           "--size", "tiny", *flags], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_LOGS="inductor_metrics"))
    assert done.returncode == 0, done.stdout + done.stderr
    entries = int(re.search(r"node_runtimes: (\d+) entries", done.stdout).group(1))
    schedulers = int(re.search(r"Schedulers alive: (\d+)", done.stdout).group(1))
    return entries, schedulers


def test_inductors_metrics_lists_keep_its_schedulers_alive_until_kept_from_growing():
    entries, schedulers = _run()
    # one entry per scheduler node of each compiled graph (the runtime warm-up's and the
    # step's forward and backward), and through them their Schedulers
    assert entries > 0 and schedulers > 0, (entries, schedulers)
    assert (0, 0) == _run("--keep-metrics-from-growing")
