"""asv's timeout of the sweep under benchmarks/common.py (setup_cache) leaves nothing
running and no temporary file: asv (asv.util.check_output) sends SIGTERM to the
benchmark process's group, waits up to a second, then sends SIGKILL. The sweep is in
that group; its workers are not (sessions of their own), so the sweep kills them."""

import os
import signal
import subprocess
import sys
import time

from fault_helpers import PROJECT, processes_mentioning, wait_for

SETUP_CACHE = f"import sys; sys.path.insert(0, {str(PROJECT / 'benchmarks')!r}); import common; common.sweep()"


def group_members(pgid):
    members = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return members


def test_asvs_timeout_ends_the_sweep_its_workers_and_their_files(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "GRADMEM_TEST_PLANT": "hang:forward", "GRADMEM_ASV_SIZE": "tiny",
           "GRADMEM_ASV_WORKLOADS": "chained_dot", "GRADMEM_ASV_FRAMEWORKS": "reference",
           "GRADMEM_ASV_DEVICES": "cpu", "GRADMEM_ASV_MODES": "eager", "GRADMEM_ASV_OPTIMIZER": "none"}
    env.pop("GRADMEM_ASV_RECORDS", None)
    # as asv starts setup_cache: a process group of its own (asv.util.check_output)
    bench = subprocess.Popen([sys.executable, "-c", SETUP_CACHE], cwd=tmp_path, env=env, preexec_fn=os.setpgrp,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: any('"forward"' in p.read_text() for p in scratch.glob("gradmem-sweep-*/*-memory-*.marks")),
             what="the sweep's worker in its forward phase (planted hang)")
    assert processes_mentioning(str(scratch), "-memory-")  # the worker (its job path or its log)

    os.killpg(bench.pid, signal.SIGTERM)  # asv's timeout
    deadline = time.monotonic() + 1.0
    while group_members(bench.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    ended_in_time = not group_members(bench.pid)
    if not ended_in_time:
        os.killpg(bench.pid, signal.SIGKILL)  # what asv does next
    bench.wait()

    assert ended_in_time  # asv's SIGKILL was not needed
    assert bench.returncode == -signal.SIGTERM  # the benchmark died of the signal, as asv expects
    assert processes_mentioning(str(scratch)) == []  # the worker in its own session too
    assert list(scratch.iterdir()) == []  # the records' and the sweep's temporary directories
