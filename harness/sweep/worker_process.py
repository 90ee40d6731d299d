"""Start one worker process, watch it, and say how it ended.

The worker is ``python -m harness.measure.worker JOB RESULT`` in a new session (its
own process group), with the environment it needs set before it starts; or, given a
zygote pool (harness/sweep/zygote.py, `--start fork`), the same worker forked from
a process that has already imported its framework, with the same face: its own
session, stdin, log, exit status. The parent
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

from harness import interrupts
from harness.measure import failures
from harness.measure.marks import read_marks
from harness.sweep.timeline import RssSampler

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
    node: dict = None  # a cluster executor's: the node the pass ran on (ray_executor.py)

    @property
    def ok(self):
        return self.status == "ok"


class WorkerProcess:
    """One running worker: started at once, then `poll()`ed until it has ended, then
    `outcome()`. Not blocking, so an executor can watch several (harness/sweep/executor.py)."""

    def __init__(self, job, env, workdir, name, timeout_s=None, sample_rss=False, gated=False, python=None,
                 zygotes=None):
        # python: the worker's interpreter (a pinned framework version's environment,
        # harness/versions/envs.py); None is this one. zygotes: a zygote.ZygotePool to
        # fork the worker from (None, or a framework it does not fork: spawned)
        self.paths = {kind: os.path.join(workdir, f"{name}.{kind}") for kind in ("job", "result", "marks", "log")}
        # parent_pid: worker.py's end_with_parent
        self.job = dict(job, marks_path=self.paths["marks"], gated=gated, parent_pid=os.getpid())
        self.timeout_s = timeout_s
        with open(self.paths["job"], "w", encoding="utf-8") as handle:
            json.dump(self.job, handle)
        self.started = time.monotonic()
        self.oom_kills_before = failures.oom_kills()
        zygote = zygotes.zygote_for(job, env, python) if zygotes is not None else None  # may import (seconds)
        # the timeout counts from the worker's start, not from its zygote's imports
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # Registered before a signal can cut in: the handler kills every registered
        # group (interrupts.py), and a worker it does not know of would run on.
        with interrupts.deferred(), open(self.paths["log"], "wb") as log:
            self.proc = zygotes.fork(zygote, self.paths["job"], self.paths["result"], log, gated) if zygote else None
            if self.proc is None:
                self.proc = SpawnedProcess(
                    [python or sys.executable, "-m", "harness.measure.worker", self.paths["job"], self.paths["result"]],
                    env, log, gated,
                )
            interrupts.started(self.proc.pid)
        self.pid = self.proc.pid
        self.sampler = RssSampler(self.proc.pid).start() if sample_rss else None
        self.timed_out = self.killed = self.ended = False
        self.wall_s = 0.0
        # A gated worker stops at its "ready" mark (set up, nothing measured yet) and
        # reads stdin until `release()`: its measured part then runs when the executor
        # says so. The time spent waiting does not count against its timeout.
        self.gated, self.released, self.ready_at = gated, not gated, None

    def restart_clock(self):
        """The timeout counts from now: a worker that runs several items, each with the
        whole timeout (harness/check/framework_runner.py: one framework's cells, one after another)."""
        if self.timeout_s is not None:
            self.deadline = time.monotonic() + self.timeout_s

    def at_gate(self):
        """True while a gated worker waits at its gate (it has marked "ready")."""
        if self.released or self.ended:
            return False
        if self.ready_at is None and any(name == "ready" for _, name in read_marks(self.paths["marks"])):
            self.ready_at = time.monotonic()
        return self.ready_at is not None

    def release(self):
        """Let a worker waiting at its gate go on (it reads one line from stdin)."""
        if self.deadline is not None and self.ready_at is not None:
            self.deadline += time.monotonic() - self.ready_at
        self.released = True
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died meanwhile: poll() will say how

    def poll(self):
        """True once the worker has exited (or was killed at its timeout)."""
        if self.ended:
            return True
        if self.proc.exited():
            self._end()
        elif self.deadline is not None and not self.at_gate() and time.monotonic() >= self.deadline:
            self.timed_out = True
            self._end()
        return self.ended

    def kill(self):
        """Kill the worker's whole process group now (cancel, Ctrl-C, SIGTERM)."""
        if not self.ended:
            self.killed = True
            self._end()

    def _end(self):
        if self.ended:  # a signal handler's cancel may have ended it meanwhile
            return
        self.ended = True
        self.wall_s = time.monotonic() - self.started
        if self.sampler is not None:
            self.sampler.stop()
        _kill_group(self.proc)  # the worker (if hung) and anything it left running
        interrupts.ended(self.proc.pid)  # before reaping: see interrupts.started
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self.proc.wait()

    def outcome(self):
        """How the ended worker went: an Outcome, never an exception."""
        paths, job = self.paths, self.job
        marks = read_marks(paths["marks"])
        last = marks[-1][1] if marks else None
        limited = bool(job.get("memory_limit"))
        if self.timed_out:
            message = (
                f"worker exceeded the timeout of {self.timeout_s:g} s{failures.where(last)}; its process group was killed"
            )
            return Outcome("timeout", message, {}, marks, self.sampler, self.wall_s)
        if os.path.exists(paths["result"]):
            with open(paths["result"], encoding="utf-8") as handle:
                result = json.load(handle)
            message = result.get("message", "")
            if result["status"] == "error" and not result.get("one_line"):  # one_line: failures.from_exception
                message = f"{message}\n--- worker output (tail) ---\n{_tail(paths['log'])}".rstrip()
            return Outcome(result["status"], message, result, marks, self.sampler, self.wall_s)
        oom_kills_after = failures.oom_kills()
        before = self.oom_kills_before
        oom_killed = None if None in (before, oom_kills_after) else oom_kills_after > before
        status, message = failures.from_death(self.proc.returncode, _tail(paths["log"]), last, limited, oom_killed)
        return Outcome(status, message, {}, marks, self.sampler, self.wall_s)


class SpawnedProcess:
    """A worker started as a fresh interpreter (the Popen), in a session of its own."""

    def __init__(self, argv, env, log, gated):
        self.popen = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE if gated else subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.pid, self.stdin = self.popen.pid, self.popen.stdin

    def exited(self):
        """Without reaping it (WNOWAIT): its PID stays its own until wait()."""
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def wait(self):
        return self.popen.wait()

    @property
    def returncode(self):
        return self.popen.returncode


def run_worker(job, env, workdir, name, timeout_s=None, sample_rss=False, python=None):
    """Run one worker job (a dict) to completion; an Outcome, never an exception
    (except KeyboardInterrupt and interrupts.Interrupted, after the worker's group has
    been killed). `python`: the worker's interpreter (None: this one)."""
    return wait(WorkerProcess(job, env, workdir, name, timeout_s, sample_rss, python=python))


def wait(worker, watch=None):
    """`worker`'s Outcome once it has ended, `watch(worker)` called at every poll (None:
    nothing); on any exception its group is killed first (KeyboardInterrupt and
    interrupts.Interrupted come through)."""
    try:
        while not worker.poll():
            if watch is not None:
                watch(worker)
            time.sleep(POLL_S)
    except BaseException:
        worker.kill()
        raise
    interrupts.raise_if_stopping()  # killed by a signal's handler: not a failed cell
    return worker.outcome()


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
