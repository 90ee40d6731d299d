"""A worker killed from outside with SIGKILL (as the kernel's OOM killer, a person or
a scheduler does) is a record naming the signal, and the sweep goes on."""

import os
import signal

from harness.measure import failures
from harness.sweep import outcome

from fault_helpers import Sweep, lines, wait_for


def test_a_sigkilled_worker_is_recorded_with_the_signal_and_the_sweep_goes_on(tmp_path):
    # The eager cell's memory worker hangs (planted) until the test kills it; the
    # compiled cell after it is ruled out at once.
    before = failures.oom_kills()
    sweep = Sweep(tmp_path, "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                  "--mode", "eager,compiled", "--timeout", "120", env={"GRADMEM_TEST_PLANT": "hang:forward"})
    (worker,) = wait_for(lambda: sweep.workers("-memory-"), what="the memory worker")
    wait_for(lambda: any('"forward"' in p.read_text() for p in sweep.scratch.glob("*/*-memory-*.marks")),
             what="the worker's forward phase")
    os.kill(worker, signal.SIGKILL)
    code, _, stderr = sweep.finish()
    # the killed cell failed and the compiled one is unavailable: nothing was measured
    assert code == outcome.NONE_MEASURED and "no cell was measured: 1 of 2 failed" in stderr, stderr

    # The compiled cell is ruled out before any worker starts (harness/sweep/schedule.py),
    # so its record comes first; the sweep still ends normally with both records.
    by_mode = {record["mode"]: record for record in lines(sweep.out)}
    killed, after = by_mode["eager"], by_mode["compiled"]
    assert after["status"] == "unavailable"
    assert "killed by SIGKILL" in killed["message"] and "(last mark: forward)" in killed["message"]
    if before is not None and failures.oom_kills() == before:
        # no OOM kill on the machine meanwhile: someone else's SIGKILL, said as such
        assert killed["status"] == "error" and "not the kernel's OOM killer" in killed["message"]
    else:
        assert killed["status"] in ("oom", "error")
    assert sweep.workers() == [] and sweep.leftovers() == []


def test_sigkill_status_follows_the_kernels_oom_kill_count():
    kill = -signal.SIGKILL
    assert failures.from_death(kill, "", oom_killed=True)[0] == "oom"
    status, message = failures.from_death(kill, "", oom_killed=False)
    assert status == "error" and "SIGKILL" in message and "not the kernel's OOM killer" in message
    status, message = failures.from_death(kill, "", oom_killed=None)  # no /proc/vmstat count
    assert status == "oom" and "OOM killer?" in message
    assert failures.from_death(-signal.SIGSEGV, "")[1].startswith("worker died of SIGSEGV")


def test_a_c_library_that_cannot_malloc_under_the_limit_is_oom():
    # OpenBLAS prints this and calls exit(1) when a GEMM buffer cannot be malloc'd under
    # RLIMIT_AS: the worker ends with no result and no Python traceback. Seen in CI on
    # chained_dot paper float64 under an 800 MB limit.
    status, message = failures.from_death(1, "OpenBLAS: malloc failed in gemm_driver", memory_limited=True)
    assert status == "oom", message
    assert "malloc failed" in message
    # A plain exit with an unrelated message stays an error.
    assert failures.from_death(1, "Segmentation fault in foo")[0] == "error"
