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


def _run(inherited_cache, *flags):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "torch_inductor_metrics.py"), "chained_dot",
                           "--size", "tiny", "--python-heap", "--allocators", *flags], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1", TORCH_LOGS="inductor_metrics",
                                   TORCHINDUCTOR_CACHE_DIR=str(inherited_cache),
                                   GRADMEM_COMPILE_CACHE_DIR=str(inherited_cache)))
    assert done.returncode == 0, done.stdout + done.stderr
    # a cache the caller set (Inductor's variable or the worker's) is never the tool's: a warm
    # one would skip the compile that fills the lists
    assert not any(inherited_cache.iterdir()), sorted(p.name for p in inherited_cache.iterdir())
    entries = int(re.search(r"node_runtimes: (\d+) entries", done.stdout).group(1))
    schedulers = int(re.search(r"Schedulers alive: (\d+)", done.stdout).group(1))
    heap = float(re.search(r"left alive \(tracemalloc\): ([\d.]+) MiB", done.stdout).group(1))
    arenas, live = (float(re.search(rf"pymalloc {name}: [\d.]+ -> ([\d.]+) MiB", done.stdout).group(1))
                    for name in ("arenas", "live"))
    # what pymalloc holds live sits in its arenas: never more than they hold (a misread of
    # sys._debugmallocstats, e.g. another section's count, would break this)
    assert 0 < live <= arenas, (live, arenas)
    return entries, schedulers, heap


def test_inductors_metrics_lists_keep_its_schedulers_alive_until_kept_from_growing(tmp_path):
    entries, schedulers, heap = _run(tmp_path)
    # one entry per scheduler node of each compiled graph (the runtime warm-up's and the
    # step's forward and backward), and through them their Schedulers
    assert entries > 0 and schedulers > 0, (entries, schedulers)
    kept_entries, kept_schedulers, kept_heap = _run(tmp_path, "--keep-metrics-from-growing")
    assert (0, 0) == (kept_entries, kept_schedulers)
    # what the lists keep alive (Schedulers, their IR and FX graphs) is Python objects: the
    # Python heap the steps leave is larger with them (chained_dot tiny, 2.13.0 with the
    # log on: 1.58 against 1.12 MiB, one run each)
    assert heap > kept_heap, (heap, kept_heap)
