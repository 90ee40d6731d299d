"""When each pass of a sweep runs: the order, and what may share the machine.

Two schedules, the same passes and the same records:

- ``serial`` (default; the original schedule): one pass at a time, cell after
  cell: its reference gradient (first cell of a workload), memory pass, time pass.
- ``parallel`` (opt-in, --schedule parallel; docs/measurement.md says why it is not
  the default yet): the reference gradients first, then every memory pass, up to
  `jobs` at once (a resident peak is per process; that its figures match the serial
  schedule's within 1 % is not yet shown), a cell's memory pass as soon as its
  workload's reference gradient exists; each cell's time pass is submitted when its
  memory pass succeeded, behind the memory passes already queued. Time passes are
  gated (harness/sweep/executor.py): their set-up overlaps other passes, their
  measured part runs alone. Records of cells whose memory pass failed are written as
  soon as it ends, the others as their time pass ends.

With a budget (`harness run --budget`, harness/sweep/budget.py) a cell starts only if it
is expected to end in time; the parallel schedule then admits cells as others end (at
most --jobs in flight) instead of handing every cell to the executor at once, and, once
the time left is what the waiting time passes need, has the executor stop the memory
passes still working (the endgame: their cells are left for --resume, the waiting
ones get recorded).

A CUDA memory pass runs alone unless NVML answers per process (cuda_sharing.py), under
either schedule; the serial schedule runs one pass at a time anyway.

`run(...)` drives an executor and calls `emit(index, record)` for each finished cell.
"""

import json
import os
from collections import deque

from harness.sweep import cells, pass_rules
from harness.sweep.budget import PASS_OVERHEAD_S
from harness.sweep.cell_runner import CellState, reference_key
from harness.sweep.executor import STOPPED
from harness.units import GIB

SCHEDULES = ("parallel", "serial")


def run(todo, runner, executor, emit, schedule="serial", budget=None):
    """Measure the cells `todo` (a list) through `executor`; every record goes to `emit`.
    `budget` (budget.Budget): start a cell only if it is expected to end in time; the
    cells left out are in `budget.left_out`."""
    states = []
    for index, cell in enumerate(todo):
        state = runner.start(index, cell)
        if isinstance(state, CellState):
            states.append(state)
        else:
            emit(index, state)  # unavailable here: decided without a worker
    if budget is not None:
        budget.plan([state.cell for state in states], unavailable=len(todo) - len(states))
    if schedule == "serial":
        _serial(states, runner, executor, emit, budget)
    elif schedule == "parallel":
        _parallel(states, runner, executor, emit, budget)
    else:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}")


def _one(executor, task):
    """Submit `task` and wait for its outcome."""
    executor.submit(task)
    for _, outcome in executor.outcomes():
        return outcome
    raise RuntimeError(f"the executor ended without an outcome for {task.name}")


def _serial(states, runner, executor, emit, budget=None):
    for state in states:
        if budget is not None and not budget.admit(state.cell):
            continue  # not expected to end in time: left for --resume
        task = runner.reference_task(state.cell)
        if task is not None:
            runner.reference_done(task, _one(executor, task))
        failed = runner.memory_done(state, _one(executor, runner.memory_task(state)))
        if failed is not None:
            emit(state.index, failed)
            continue
        emit(state.index, runner.time_done(state, _one(executor, runner.time_task(state))))


def _parallel(states, runner, executor, emit, budget=None):
    """Without a budget every cell is handed to the executor at once (it keeps its
    slots); with one, cells are admitted in order as memory passes end (`room`), each only if it is expected to end in time after the time passes queued
    ahead (else it waits for them, or, if it would not fit even alone, is left out)."""
    queue = deque(states)
    waiting = {}  # reference key -> states whose memory pass waits for that gradient
    in_flight = {}  # cell index -> its state, from its admission to its record (budget only)
    if budget is not None:
        # the cells whose memory pass has ended wait for their time pass: their records
        # come first at the end (the executor's endgame)
        executor.endgame = lambda: budget.endgame([s.cell for s in in_flight.values() if s.memory is not None])

    def begin(state):
        key = reference_key(state.cell)
        if key in waiting:
            waiting[key].append(state)
            return
        task = runner.reference_task(state.cell)
        if task is None:  # known already, or the engine is unavailable (the note says)
            executor.submit(runner.memory_task(state))
        else:
            waiting[key] = [state]
            executor.submit(task)

    def ahead():
        """Seconds the cells in flight may hold a new cell's time pass back: their time
        passes' measured parts (one at a time, in any order: a later cell's may go first;
        their set-ups overlap) with their overheads, and the memory passes not yet ended
        (`jobs` at a time; a wave of time passes is released when the passes working
        beside it have ended): their share, or the longest of them."""
        memory = [budget.costs.cost(s.cell).memory_s for s in in_flight.values() if s.memory is None]
        waiting_memory = max(sum(memory) / budget.jobs, max(memory, default=0.0))
        alone = sum(budget.costs.cost(s.cell).alone_s + 2 * PASS_OVERHEAD_S for s in in_flight.values())
        return alone + waiting_memory

    def room():
        """Whether another cell may be admitted: fewer than 2 x `jobs` memory passes in
        flight (the slots stay busy, and the executor sees memory passes queued, so it
        drains for time passes a wave at a time), and fewer cells in flight than a wave
        (pass_rules.py), which bounds what a stop at the budget leaves unrecorded."""
        memory = sum(1 for s in in_flight.values() if s.memory is None)
        return memory < 2 * budget.jobs and len(in_flight) < pass_rules.WAVE_PER_SLOT * budget.jobs

    def admit():
        while queue and (budget is None or room()):
            state = queue[0]
            if budget is not None:
                if executor.endgame():
                    return  # the waiting time passes have the time left: nothing new starts
                if not budget.fits(state.cell, queued_time_s=ahead()):
                    if in_flight and budget.fits(state.cell):
                        return  # it fits once the cells ahead are done: wait for them
                    queue.popleft()
                    budget.leave_out(state.cell)  # not even alone: left for --resume
                    continue
                budget.start(state.cell)
                in_flight[state.index] = state
            begin(queue.popleft())

    def ended(state, record):
        emit(state.index, record)
        in_flight.pop(state.index, None)
        admit()

    def stopped(state):
        budget.stop(state.cell)  # no record: left for --resume
        in_flight.pop(state.index, None)

    admit()
    for task, outcome in executor.outcomes():
        kind, payload = task.tag
        if outcome.status == STOPPED:  # the endgame stopped it (budget only)
            for state in waiting.pop(payload, []) if kind == "reference" else [payload]:
                stopped(state)
            admit()
        elif kind == "reference":
            runner.reference_done(task, outcome)
            for state in waiting.pop(payload, []):
                executor.submit(runner.memory_task(state))
        elif kind == "memory":
            failed = runner.memory_done(payload, outcome)
            if failed is not None:
                ended(payload, failed)
            else:
                executor.submit(runner.time_task(payload))
                admit()  # a memory slot is free: the next cell's memory pass may start
        else:
            ended(payload, runner.time_done(payload, outcome))
    while queue:  # held back by the endgame until nothing was left to run
        budget.leave_out(queue.popleft().cell)


def default_jobs(per_job=4 * GIB, cuda=False, threads=2):
    """Memory passes at once: one per CPU, and no more than one per 4 GiB of available
    memory (the largest `small` worker here, TensorFlow's, peaks at about 0.75 GiB
    resident; `paper` cells are larger). A sweep with CUDA cells: no more than one per
    `threads` CPUs (each worker's framework threads, on a GPU host's CPUs compiling
    kernels), and at most CUDA_JOBS (each holds a CUDA context and its pool on the one
    GPU: the largest recorded CUDA cell, seq2seq_attention paper with Adam, held 5.4 GiB
    in NVML's figure, so 8 of them fit an 80 GB GPU)."""
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    by_memory = max(1, available // per_job) if available else 1
    jobs = max(1, min(os.cpu_count() or 1, by_memory))
    if cuda:
        jobs = max(1, min(jobs, (os.cpu_count() or 1) // max(1, threads), CUDA_JOBS))
    return jobs


#: the most CUDA memory passes side by side (default_jobs)
CUDA_JOBS = 8


class PassLog:
    """--schedule-log: where a sweep's time went, one JSON line per pass (times in
    seconds since the sweep started; marks relative to the pass's start)."""

    def __init__(self, path, origin):
        self.handle = open(path, "w", encoding="utf-8")
        self.origin = origin

    def __call__(self, task, outcome):
        cell = task.job.get("cell") or {}
        line = {
            "pass": task.job.get("kind"),
            "cell": cells.label(cell) if cell else "",
            "started_s": round(task.started - self.origin, 4),
            "ended_s": round(task.ended - self.origin, 4),
            "status": outcome.status,
            "worker_s": round(outcome.wall_s, 4),  # the worker process's own wall time (the rest: overhead)
            "marks": [[round(t - task.started, 4), name] for t, name in outcome.marks],
        }
        self.handle.write(json.dumps(line) + "\n")
        self.handle.flush()

    def close(self, **summary):
        self.handle.write(json.dumps({"sweep": summary}) + "\n")
        self.handle.close()
