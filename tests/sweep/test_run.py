"""`python -m harness run` end to end: honest peaks, every status, records that survive."""

import json
import os
import subprocess
import sys

import pytest

from harness import results, workloads

pytestmark = pytest.mark.slow  # acceptance: `harness run` end to end, real sweeps whose figures are checked

RUN = [sys.executable, "-m", "harness", "run"]


def run(tmp_path, *args, env=None):
    out = tmp_path / "r.jsonl"
    proc = subprocess.run(
        RUN + list(args) + ["--out", str(out)],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )
    return proc, (results.read_records(out) if out.exists() else [])


def test_reference_peak_on_chained_dot_is_at_least_the_bound_and_close_to_it(tmp_path):
    proc, records = run(tmp_path, "--workload", "chained_dot", "--framework", "reference",
                        "--size", "small", "--dtype", "float64", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    (record,) = records
    assert record["status"] == "ok"
    bound = workloads.bound_bytes("chained_dot", "small", "float64")  # 100 MB
    peak = record["peak_bytes"]["total"]
    # Nothing that stores activations can keep fewer than the L live intermediates; the
    # engine adds at most 3 D x D buffers (6 MB) for backward, and RSS adds page and
    # allocator slack: 15 % over the bound is generous and still catches a lost
    # in-place accumulation (which would add up to L D x D gradient buffers).
    assert bound <= peak <= 1.15 * bound
    assert record["grad_rel_err"] <= 1e-12  # the reference against itself, float64


def test_a_hang_times_out_a_missing_gpu_is_unavailable_and_the_sweep_goes_on(tmp_path):
    proc, records = run(tmp_path, "--workload", "chained_dot", "--framework", "reference",
                        "--size", "tiny", "--device", "cpu,cuda", "--timeout", "5",
                        env={"GRADMEM_TEST_PLANT": "hang:forward"})
    statuses = {r["device"]: r["status"] for r in records}
    assert statuses == {"cpu": "timeout", "cuda": "unavailable"}  # no GPU on CI machines
    assert "timeout" in next(r["message"] for r in records if r["device"] == "cpu")


def test_a_planted_error_is_recorded_with_its_message(tmp_path):
    _, (record,) = run(tmp_path, "--workload", "chained_dot", "--framework", "reference",
                       "--size", "tiny", env={"GRADMEM_TEST_PLANT": "error:forward"})
    assert record["status"] == "error"
    assert "planted error" in record["message"]


def test_a_memory_limit_below_the_need_is_oom(tmp_path):
    # chained_dot paper float64 keeps 100 intermediates of 8 MB: 800 MB on top of the
    # interpreter's own address space, so an 800 MB address-space limit cannot hold it.
    _, (record,) = run(tmp_path, "--workload", "chained_dot", "--framework", "reference",
                       "--size", "paper", "--dtype", "float64", "--memory-limit", "800000000")
    assert record["status"] == "oom", record["message"]


def test_records_are_whole_lines_and_a_bad_name_lists_the_choices(tmp_path):
    proc, records = run(tmp_path, "--workload", "chained_dot", "--framework", "reference",
                        "--size", "tiny")
    assert proc.returncode == 0
    text = (tmp_path / "r.jsonl").read_text()
    assert text.endswith("\n") and all(json.loads(line) for line in text.splitlines())
    assert "peak/bound" in proc.stdout  # the table
    proc, _ = run(tmp_path, "--framework", "mxnet")
    assert proc.returncode == 2 and "valid frameworks" in proc.stderr


def test_jax_start_up_is_not_counted_against_the_workload(tmp_path):
    proc, records = run(tmp_path, "--workload", "chained_dot", "--framework", "jax",
                        "--size", "small", "--dtype", "float64", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    (record,) = records
    assert record["status"] == "ok", record["message"]
    bound = record["bound_bytes"]  # the L = 50 intermediates of 2 MB that must be kept
    peak = record["peak_bytes"]["total"]
    assert peak >= bound  # nothing that stores activations keeps fewer bytes
    # Above the bound JAX keeps its own executables for this workload's ops and the
    # backward's transient buffers: ~24 MiB here. XLA's compiler start-up (~40 MiB, kept
    # for the life of the process) is paid before the baseline (runtime_warmup.py); if
    # it landed in the window again the excess would be ~64 MiB.
    assert peak - bound < 40 * 2**20


def test_threads_reach_every_pass_and_the_parallel_schedule_runs(tmp_path):
    proc, (record,) = run(tmp_path, "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                          "--threads", "1", "--schedule", "parallel", "--repeat", "3", "--time-budget", "0")
    assert proc.returncode == 0, proc.stderr
    assert "parallel schedule" in proc.stderr
    assert record["provenance"]["threads"] == 1
    for env in (record["provenance"]["env"], record["provenance"]["time_env"]):  # memory and time pass
        assert env["GRADMEM_THREADS"] == env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert record["provenance"]["settings"]["threads"] == 1  # what the adapter set in the worker
    assert record["time_stats"]["samples"] == 3 and record["time_stats"]["stopped_by"] == "repeat"
    # the time pass (gated) says how long it waited at its gate: part of its wall, not its cost
    prov = record["provenance"]
    assert 0 <= prov["gate_wait_s"]["time"] <= prov["worker_wall_s"]["time"]
    proc, _ = run(tmp_path, "--threads", "0")
    assert proc.returncode == 2 and "--threads" in proc.stderr
    proc, _ = run(tmp_path, "--schedule", "fastest")
    assert proc.returncode == 2 and "valid schedules: parallel, serial" in proc.stderr


def test_the_time_budget_goes_to_steps_not_to_garbage_collection(tmp_path):
    proc, records = run(tmp_path, "--workload", "shared_linear", "--framework", "torch", "--size", "tiny",
                        "--time-budget", "1")
    assert proc.returncode == 0, proc.stderr
    (record,) = records
    stats = record["time_stats"]
    steps = record["time_samples_s"]["total"]
    assert stats["samples"] == len(steps) >= 5
    # Between timed steps the worker runs gc.collect() outside the clock. A full
    # collection with torch imported walks ~0.1 s of objects (measured); the worker
    # freezes what exists before the timed steps, so a collection sees only a step's
    # own objects. Everything between steps (collection, two /proc/stat reads) must
    # then be far below 0.1 s a step: 30 ms leaves room for a loaded machine.
    between = (stats["timed_s"] - sum(steps)) / len(steps)
    assert between < 0.03, between
