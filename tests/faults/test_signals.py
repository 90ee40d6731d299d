"""A sweep told to stop (SIGTERM: `timeout`, a cancelled CI job, a scheduler; SIGHUP: a
closed terminal; SIGINT: Ctrl-C) mid-cell leaves no worker running and no temporary
file, keeps every finished record, and exits 128 + the signal."""

import os
import signal

import pytest

from fault_helpers import ONE_OF_EACH, Check, Sweep, lines, wait_for


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_cell_kills_the_workers_keeps_the_records_and_cleans_up(tmp_path, signum):
    # A cell the parent rules out at once (a record before the kill), then one whose
    # memory pass hangs at its forward phase (planted): the kill lands mid-cell, with a
    # worker running in a session of its own that the signal itself never reaches.
    sweep = Sweep(tmp_path, *ONE_OF_EACH, "--timeout", "120", env={"GRADMEM_TEST_PLANT": "hang:forward"})
    wait_for(lambda: sweep.out.exists() and sweep.workers("-memory-"), what="a record, then the next cell's worker")
    sweep.proc.send_signal(signum)
    code, _, stderr = sweep.finish(timeout=30)

    assert code == 128 + signum, stderr
    assert f"interrupted by {signum.name}" in stderr and "1 finished record(s) kept" in stderr
    (record,) = lines(sweep.out)  # the finished cell, whole
    assert record["status"] == "unavailable" and record["mode"] == "compiled"
    # the hanging worker's group was killed, not orphaned, and is gone: the command waits
    # for the groups it killed before it exits (harness/interrupts.py, step 3)
    assert sweep.workers() == []
    assert sweep.leftovers() == []  # the sweep's temporary directory is gone


def test_a_sigkilled_sweep_takes_its_workers_with_it(tmp_path):
    # SIGKILL cannot be handled: the kernel kills the worker when its parent dies
    # (PR_SET_PDEATHSIG); the temporary directory stays (docs/faults.md says so).
    sweep = Sweep(tmp_path, *ONE_OF_EACH, "--timeout", "120", env={"GRADMEM_TEST_PLANT": "hang:forward"})
    wait_for(lambda: sweep.out.exists() and sweep.workers("-memory-"), what="a record, then the next cell's worker")
    sweep.proc.send_signal(signal.SIGKILL)
    sweep.finish(timeout=30)
    try:
        wait_for(lambda: sweep.workers() == [], timeout=5, what="the orphaned worker to die")
    finally:
        for pid in sweep.workers():  # a hung orphan must not outlive a failed test
            os.kill(pid, signal.SIGKILL)
    assert len(lines(sweep.out)) == 1


# A workload whose loss hangs: the check's first cell (the reference's truth) is stuck
# mid-cell in its worker when the signal comes.
HANGING = """
import time
SIZES = {"tiny": {"D": 4}, "small": {"D": 4}, "paper": {"D": 4}}
BATCH_AXIS = "D"

def init(rng, cfg, dtype):
    return {"w": rng.standard_normal((cfg["D"],)).astype(dtype)}, {}

def loss(ops, params, inputs, cfg):
    time.sleep(600)
    return ops.sum(params["w"])
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_cell_of_a_check_kills_its_workers_and_cleans_up(tmp_path, signum):
    # `harness check` starts its workers as `harness run` does (harness/check/framework_runner.py):
    # sessions of their own, registered with interrupts.py, so a signal to the check
    # kills them and it exits 128 + the signal, its temporary directory removed.
    workload = tmp_path / "hanging.py"
    workload.write_text(HANGING)
    check = Check(tmp_path, "--workload", str(workload), "--framework", "autograd", "--mode", "eager",
                  "--dtype", "float64", "--timeout", "120")
    wait_for(lambda: check.marked("\"mark\": \"cell ") and check.workers(), what="a check's worker mid-cell")
    check.proc.send_signal(signum)
    code, stdout, stderr = check.finish(timeout=30)

    assert code == 128 + signum, stderr
    assert f"interrupted by {signum.name}" in stderr and stdout == ""
    # the hanging worker's group (and its zygote) killed, not orphaned, and gone (as above)
    assert check.workers() == []
    assert check.leftovers() == []  # the check's temporary directory is gone
