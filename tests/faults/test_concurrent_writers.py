"""Two sweeps appending to one file at once lose no record and interleave no line:
each append (read the file, write old bytes + one line to a temporary file, rename it
over the file) holds an exclusive lock on FILE.lock (harness/results.py)."""

import fcntl
import os

from fault_helpers import INSTANT, Sweep, lines, wait_for
from harness import workloads

# Every workload x 2 frameworks x 3 sizes ruled out at once per sweep (PER_SWEEP cells):
# the two sweeps append as fast as they can.
CELLS = [*INSTANT, "--workload", "all", "--framework", "reference,autograd", "--size", "tiny,small,paper"]
PER_SWEEP = len(workloads.NAMES) * 2 * 3


def waiting_on(path):
    """PIDs of processes blocked on a lock of `path` (/proc/locks: "->" marks a waiter)."""
    inode = os.stat(path).st_ino
    pids = set()
    with open("/proc/locks") as handle:
        for line in handle:
            fields = line.split()
            if "->" in fields and fields[fields.index("->") + 5].endswith(f":{inode}"):
                pids.add(int(fields[fields.index("->") + 4]))
    return pids


def test_two_sweeps_into_one_file_lose_no_record_and_tear_no_line(tmp_path):
    out = tmp_path / "r.jsonl"
    with open(f"{out}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the test holds the lock first
        sweeps = [Sweep(tmp_path, *CELLS, "--seed", str(seed)) for seed in (1, 2)]
        pids = {s.proc.pid for s in sweeps}
        # Both sweeps reach their first append and wait for the lock, writing nothing.
        wait_for(lambda: waiting_on(f"{out}.lock") >= pids, timeout=30, what="both sweeps blocked on the lock")
        assert not out.exists()
        fcntl.flock(lock, fcntl.LOCK_UN)  # now they race each other for it, PER_SWEEP times each
    for sweep in sweeps:
        code, _, stderr = sweep.finish()
        assert code == 0, stderr
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl", "scratch"]  # the lock file went with the last append

    records = lines(out)  # every line whole JSON
    assert len(records) == 2 * PER_SWEEP
    for seed in (1, 2):
        mine = [r for r in records if r["provenance"]["seed"] == seed]
        assert len(mine) == PER_SWEEP and len({(r["workload"], r["framework"], r["size"]) for r in mine}) == PER_SWEEP
