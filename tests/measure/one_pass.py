"""One memory pass of a chained_dot cell in a fresh worker, as a sweep runs it: shared
by the tests of what a step peak means (test_step_program.py) and of the prediction
beside it (test_prediction.py).

chained_dot keeps z_1 .. z_{L-1}, each (D, cols), for x's gradient: the bound. At tiny
(D=32, L=5) with cols=16384 that is 4 arrays of 2 MiB = 8 MiB, far above the RSS
figure's ~0.25 MiB grain, while the step still takes milliseconds."""

import pytest

from harness import frameworks
from harness.sweep import environment
from harness.sweep.worker_process import run_worker

COLS = 16384


def memory_pass(framework, mode, tmp_path, **job_extra):
    """The memory pass's result of chained_dot tiny at COLS columns (skips where the
    framework is not installed); `job_extra` goes into the worker's job."""
    adapter = frameworks.get(framework)
    ok, why = adapter.available()
    if not ok:
        pytest.skip(why)
    cell = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": framework,
            "mode": mode, "device": "cpu", "batch": COLS}
    env, _ = environment.worker_environment(adapter, "memory")
    job = {"kind": "memory", "cell": cell, "seed": 0, "warmup": 1, **job_extra}
    name = f"memory-{framework}-{mode}-{'-'.join(map(str, job_extra.values()))}"
    outcome = run_worker(job, env, str(tmp_path), name, timeout_s=600)
    assert outcome.ok, outcome.message
    return outcome.result
