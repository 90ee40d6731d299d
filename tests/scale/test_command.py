"""`python -m harness scale` end to end: one real run at tiny, and bad input refused
before anything runs."""

import os
import subprocess
import sys

from harness import results, workloads
from harness.scale import series as scale_series

SCALE = [sys.executable, "-m", "harness", "scale"]


def scale(tmp_path, *args):
    out = tmp_path / "s.jsonl"
    proc = subprocess.run(SCALE + list(args) + ["--out", str(out)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    return proc, (results.read_records(out) if out.exists() else [])


def test_a_real_run_at_tiny_fits_the_reference_engine_and_refuses_a_budget_below_batch_1(tmp_path):
    # chained_dot tiny: D = 32, L = 5; the batch axis is z's column count.
    # Batches 2 and 512, not 1: at batch 1 W's gradient is a contraction of length 1,
    # which the engine makes as a broadcast multiply (prims.linalg.product), whose ufunc
    # buffer adds ~11 KB of traced transient at that point only (measured: 38.6 KB
    # traced at batch 1, 27.4 KB at batch 2), off the per-sample line. At 512 each
    # saved product (D x 512 x 4 bytes = 64 KiB) is above the memory pass's 32 KiB mmap
    # threshold, so the footprint sees its pages and grows with the batch (below it the
    # arrays come from heap pages the process may hold already: at 64 the footprint
    # line's slope rested on a few pages).
    proc, records = scale(tmp_path, "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                          "--batch", "2,512", "--budget", "1", "--quiet")
    assert [(r["batch"], r["status"]) for r in records] == [(2, "ok"), (512, "ok")], proc.stderr
    for r in records:  # memory-only records: no time pass ran
        assert r["time_s"] is None and r["bound_bytes"] == workloads.bound_bytes("chained_dot", "tiny",
                                                                                      "float32", r["batch"])
    (fit,) = [scale_series.fit(s) for s in scale_series.group(records).values()]
    per_sample = workloads.bound_per_sample("chained_dot", "tiny", "float32")  # (L-1) D x 4 bytes = 512
    # tracemalloc counts the engine's arrays exactly: each column keeps its L-1 saved
    # products (the bound) and, at the backward peak, at most the output and two
    # cotangents of D floats more: between 1x and (L-1+3)/(L-1) = 1.75x the bound. The
    # lower end allows 1 %: Python objects of a few bytes move the two points apart by
    # a few bytes that are not the batch's (measured: 511.8 bytes per sample).
    assert 0.99 * per_sample <= fit.traced["total"].per_sample <= 1.75 * per_sample
    assert "peak total" in proc.stdout and "footprint" in proc.stdout
    # A budget of 1 byte lets no batch in: named, exit 2. (At tiny the footprint at batch
    # 2 can read 0 bytes, a line below zero at batch 0: tests/scale/test_fit.py.)
    assert proc.returncode == 2 and "no batch fits" in proc.stderr


def test_bad_input_is_refused_before_anything_runs(tmp_path):
    for args, says in [
        (["--batch", "4"], "a line needs 2 or more batches"),
        (["--batch", "0,1,2"], "a batch must be at least 1, got 0"),
        (["--batch", "1,2", "--budget", "lots"], "expected bytes, e.g. 1GiB"),
        (["--batch", "1,2", "--verify"], "give --budget too"),
        (["--workload", "nope"], "chained_dot"),
    ]:
        proc, records = scale(tmp_path, "--framework", "reference", "--size", "tiny", *args)
        assert proc.returncode == 2 and says in proc.stderr, (args, proc.stderr)
        assert records == []


def test_failed_batches_give_the_exit_status_harness_run_gives(tmp_path):
    # chained_dot tiny keeps (L-1) = 4 saved products of D x batch float32: at 2,000,000
    # columns that is 4 x 32 x 2e6 x 4 bytes = 1 GiB, far past a 200 MiB memory limit,
    # while batches 2 and 4 need a few KiB above the worker's own start-up: one batch
    # fails (oom), the others are measured, exit 4 as `harness run` (outcome.py)
    proc, records = scale(tmp_path, "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                          "--batch", "2,4,2000000", "--memory-limit", "200MiB", "--quiet")
    assert sorted((r["batch"], r["status"]) for r in records) == [(2, "ok"), (4, "ok"), (2000000, "oom")]
    assert proc.returncode == 4 and "1 of 3 cells failed (1 oom), 2 measured" in proc.stderr, proc.stderr
    # a limit no worker starts under: nothing measured, exit 3, saying so
    proc, records = scale(tmp_path / "none", "--workload", "chained_dot", "--framework", "reference",
                          "--size", "tiny", "--batch", "2,4", "--memory-limit", "1MiB", "--quiet")
    assert [r["status"] for r in records] == ["oom", "oom"]
    assert proc.returncode == 3 and "no cell was measured" in proc.stderr, proc.stderr
