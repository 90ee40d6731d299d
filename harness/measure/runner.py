"""Start one worker process, watch it, and say how it ended.

The worker is ``python -m harness.measure.worker JOB RESULT`` in a new session (its
own process group), with the environment it needs set before it starts. The parent
never imports a framework; it only waits, samples the worker's RSS for the timeline,
and kills the whole group on timeout or when the command is told to stop (Ctrl-C,
SIGTERM, SIGHUP: interrupts.py), so compiler subprocesses (Inductor, PyTensor's g++)
die with it.

Waiting uses ``waitid(WNOWAIT)``: the exited worker stays a zombie until its group has
been cleaned up, so its PID (= the group's id) cannot be reused by an unrelated
process while we signal the group.
"""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from harness.measure import failures, interrupts
from harness.measure.marks import read_marks
from harness.measure.timeline import RssSampler

POLL_S = 0.01
LOG_TAIL_BYTES = 4000


@dataclass
class Outcome:
    status: str
    message: str = ""
    result: dict = field(default_factory=dict)
    marks: list = field(default_factory=list)
    sampler: object = None
    wall_s: float = 0.0

    @property
    def ok(self):
        return self.status == "ok"


def run_worker(job, env, workdir, name, timeout_s=None, sample_rss=False):
    """Run one worker job (a dict) to completion; an Outcome, never an exception
    (except KeyboardInterrupt and interrupts.Interrupted, after the worker's group has
    been killed)."""
    paths = {kind: os.path.join(workdir, f"{name}.{kind}") for kind in ("job", "result", "marks", "log")}
    job = dict(job, marks_path=paths["marks"], parent_pid=os.getpid())  # worker.py: _end_with_parent
    with open(paths["job"], "w", encoding="utf-8") as handle:
        json.dump(job, handle)
    started = time.monotonic()
    oom_kills_before = failures.oom_kills()
    proc = sampler = None
    try:
        # Registered before a signal can cut in: the handler kills every registered
        # group (interrupts.py), and a worker it does not know of would run on.
        with interrupts.deferred(), open(paths["log"], "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.measure.worker", paths["job"], paths["result"]],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            interrupts.started(proc.pid)
        sampler = RssSampler(proc.pid).start() if sample_rss else None
        timed_out = not _wait_exited(proc.pid, timeout_s)
    finally:
        if sampler is not None:
            sampler.stop()
        if proc is not None:
            _kill_group(proc)  # the worker (if hung) and anything it left running
            interrupts.ended(proc.pid)  # before reaping: see interrupts.started
            proc.wait()
    interrupts.raise_if_stopping()  # killed by a signal's handler: not a failed cell
    wall_s = time.monotonic() - started
    marks = read_marks(paths["marks"])
    last = marks[-1][1] if marks else None
    limited = bool(job.get("memory_limit"))
    if timed_out:
        message = f"worker exceeded the timeout of {timeout_s:g} s{failures.where(last)}; its process group was killed"
        return Outcome("timeout", message, {}, marks, sampler, wall_s)
    if os.path.exists(paths["result"]):
        with open(paths["result"], encoding="utf-8") as handle:
            result = json.load(handle)
        message = result.get("message", "")
        if result["status"] == "error":
            message = f"{message}\n--- worker output (tail) ---\n{_tail(paths['log'])}".rstrip()
        return Outcome(result["status"], message, result, marks, sampler, wall_s)
    oom_kills_after = failures.oom_kills()
    oom_killed = None if None in (oom_kills_before, oom_kills_after) else oom_kills_after > oom_kills_before
    status, message = failures.from_death(proc.returncode, _tail(paths["log"]), last, limited, oom_killed)
    return Outcome(status, message, {}, marks, sampler, wall_s)


def _wait_exited(pid, timeout_s):
    """True once `pid` has exited (left as a zombie), False at the timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    while True:
        if os.waitid(os.P_PID, pid, flags) is not None:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def _kill_group(proc):
    """SIGKILL the worker's process group (its id is the worker's PID: new session).
    Safe while the worker is unreaped: a zombie's PID is not reused."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path, limit=LOG_TAIL_BYTES):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
