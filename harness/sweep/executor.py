"""Where passes run: submit a pass, get outcomes as they finish, cancel everything.

A *pass* (`Task`) is one worker job: the JSON job, the environment its interpreter
starts with, a timeout, and what it may share the machine with:

- an ordinary pass (a memory pass, a reference gradient) runs beside others;
- an `exclusive` pass runs alone from start to end (a CUDA memory pass while NVML
  is not known to answer per process: cuda_sharing.py);
- a `gated` pass (a time pass) sets itself up beside others (imports, runtime
  warm-up, inputs: nothing of it is measured), then waits at its gate; the executor
  releases it when nothing else runs but passes waiting at their own gates (idle
  processes), and starts nothing while it runs. So time passes are alone for every
  figure they take, and their set-up overlaps other work.

An executor hands back `(task, Outcome)` pairs as passes end; it never raises for a
failed pass (the Outcome says how it ended). The sweep's schedule
(harness/sweep/schedule.py) decides what to submit when; the executor keeps the
rules above, at most `slots` passes working at once, and drains the machine for
waiting time passes a wave at a time: the rules, with the submission order and its
exceptions, are harness/sweep/pass_rules.py's, one function this executor and the
tests' simulated GPU both follow.

A `deadline` (`harness run --budget`) stops it: once past, `outcomes()` kills every
running worker and raises `budget.BudgetSpent`. Before it, under a budget, the sweep
may set `endgame` (a callable: True once the time left is what the submitted time
passes need; pass_rules.py): a pass stopped in the endgame comes back as an Outcome of
status STOPPED (no worker result; its cell is for a later run).

`cancel_all()` kills every running worker's process group (a worker is a session
leader, so compilers it started die with it) and drops what has not started; a signal
handler may call it (it is idempotent and does not wait). `LocalExecutor` runs workers
as child processes of this one; another executor (e.g. one on a cluster) implements
`submit`, `outcomes` and `cancel_all`, and `gpus` (where a cuda cell may run) and
`close` (what it holds after the sweep): RayExecutor (ray_executor.py) runs them as Ray
tasks on a cluster's nodes.
"""

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

from harness import interrupts
from harness.sweep import pass_rules
from harness.sweep.budget import BudgetSpent
from harness.sweep.worker_process import POLL_S, Outcome, WorkerProcess
from harness.sweep.zygote import ZygotePool

#: an Outcome's status for a pass the executor stopped in a budget's endgame
STOPPED = "stopped"


@dataclass
class Task:
    """One pass to run: `job` goes to ``python -m harness.measure.worker``."""

    job: dict
    env: dict
    name: str
    timeout_s: float = None
    sample_rss: bool = False  # the parent samples the worker's RSS (memory timeline)
    exclusive: bool = False  # nothing else of ours runs while it does (CUDA memory passes)
    gated: bool = False  # set up beside others, then measured alone (time passes)
    tag: object = None  # the caller's own reference (cell index, pass kind, ...)
    python: str = None  # the worker's interpreter: a pinned version's environment (None: this one)
    # the pinned version behind `python` ({"framework", "version", "torch_index"}): a
    # cluster's node builds that environment itself, where the driver's path means nothing
    pinned: dict = None
    prefer_node: dict = None  # a cluster executor's hint: run where this node is (the local one ignores it)
    node: dict = None  # a cluster executor: the node it runs on, once started
    id: int = field(default_factory=itertools.count().__next__)
    started: float = None  # time.monotonic() when its worker started, and ended
    ended: float = None


class LocalExecutor:
    """Runs passes as worker processes on this machine, `slots` at a time."""

    def __init__(self, workdir, slots=1, on_start=None, on_end=None, start="fork", deadline=None, wave=None):
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.workdir, self.slots = workdir, slots
        # time passes that may wait or queue before the machine drains for them (pass_rules.py)
        self.wave = pass_rules.WAVE_PER_SLOT * slots if wave is None else wave
        self.draining = False
        # fork: workers forked from a per-framework process that has imported it
        # (harness/sweep/zygote.py); spawn: a fresh interpreter per pass
        self.zygotes = ZygotePool(workdir, start)
        self.on_start = on_start  # called with the task as its worker starts (progress)
        self.on_end = on_end  # called with (task, outcome) as each pass ends (a log)
        self.pending = deque()
        self.running = {}  # task id -> (task, WorkerProcess)
        self.cancelled = False
        # time.monotonic() past which nothing starts and what runs is killed
        # (`harness run --budget`: BudgetSpent ends outcomes())
        self.deadline = deadline
        self.endgame = None  # under a budget: () -> True while ordinary passes must stop
        self.stopped = deque()  # (task, Outcome) of passes stopped in the endgame, to hand back

    # ---- the interface ---------------------------------------------------------------
    def submit(self, task):
        """Queue `task`; it starts when the rules above allow (inside `outcomes()`)."""
        if self.cancelled:
            raise RuntimeError("this executor was cancelled; it runs nothing more")
        self.pending.append(task)

    def outcomes(self):
        """Yield (task, Outcome) as passes end, until nothing is pending or running.

        Tasks submitted while iterating are picked up; a caller that stops iterating
        leaves the running passes running (a later call picks them up).
        KeyboardInterrupt (or any other exception raised here) kills every running
        worker before it propagates."""
        try:
            while self.pending or self.running or self.stopped:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise BudgetSpent(
                        f"the budget ran out with {len(self.running)} pass(es) running and {len(self.pending)} queued"
                    )
                self._start_what_may()
                while self.stopped:
                    yield self.stopped.popleft()
                # snapshots: a signal handler may cancel_all() in the middle of this
                ended = [(task, worker) for task, worker in list(self.running.values()) if worker.poll()]
                if ended:
                    interrupts.raise_if_stopping()  # killed by a signal's handler: not failed passes
                for task, worker in ended:
                    self.running.pop(task.id, None)
                    task.ended = task.started + worker.wall_s
                    if not worker.killed:
                        outcome = worker.outcome()
                        if self.on_end is not None:
                            self.on_end(task, outcome)
                        yield task, outcome
                if not ended and self.running:
                    time.sleep(POLL_S)
        except GeneratorExit:  # the caller stopped listening: passes go on running
            raise
        except BaseException:
            self.cancel_all()
            raise

    def cancel_all(self):
        """Kill every running worker (whole process groups) and drop pending passes.
        Safe to call from a signal handler; returns how many workers were killed."""
        self.cancelled = True
        self.pending.clear()
        killed = 0
        for _, worker in list(self.running.values()):
            if not worker.ended:
                worker.kill()
                killed += 1
        self.running.clear()
        return killed

    def gpus(self):
        """None: this machine's GPUs decide (plan.unavailable_reason looks itself)."""
        return None

    def close(self):
        """End the zygotes (after cancel_all(): no worker of theirs runs)."""
        self.zygotes.close()

    # ---- rules -----------------------------------------------------------------------
    def _start_what_may(self):
        running = [(task, _phase(worker)) for task, worker in self.running.values()]
        pending = list(self.pending) if not self.cancelled else []
        moves = pass_rules.next_moves(
            running, pending, self.slots, self.wave, self.draining, endgame=bool(self.endgame and self.endgame())
        )
        self.draining = moves.draining
        for task in moves.stop:
            self._stop(task)
        if moves.stop:
            return self._start_what_may()  # what may move once they are gone
        if moves.release is not None:
            self.running[moves.release.id][1].release()  # alone now: measure
        for task in moves.start:
            self.pending.remove(task)
            worker = WorkerProcess(
                task.job, task.env, self.workdir, task.name, task.timeout_s, task.sample_rss, gated=task.gated,
                python=task.python, zygotes=self.zygotes,
            )
            task.started = worker.started
            self.running[task.id] = (task, worker)
            if self.on_start is not None:
                self.on_start(task)

    def _stop(self, task):
        """Stop `task` (running: its worker is killed; queued: dropped) and hand it back
        as STOPPED."""
        entry = self.running.pop(task.id, None)
        if entry is not None:
            entry[1].kill()
            task.ended = task.started + entry[1].wall_s
        else:
            self.pending.remove(task)
        outcome = Outcome(STOPPED, "stopped in the budget's endgame", wall_s=0.0 if entry is None else entry[1].wall_s)
        if entry is not None and self.on_end is not None:
            self.on_end(task, outcome)  # the --schedule-log shows where its time went
        self.stopped.append((task, outcome))

    def busy(self):
        """How many passes run now (for progress lines)."""
        return len(self.running)


def _phase(worker):
    if worker.gated and worker.released:
        return pass_rules.ALONE
    return pass_rules.AT_GATE if worker.at_gate() else pass_rules.WORKING
