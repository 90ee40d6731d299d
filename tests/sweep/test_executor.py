"""The executor (harness/sweep/executor.py) with real workers on `tiny` cells: a gated
(time) pass measures alone, passes run `slots` at a time, and cancel_all from a signal
handler kills every running worker's process group."""

import os
import signal

import pytest

from harness.frameworks import reference
from harness.sweep import environment
from harness.sweep.executor import STOPPED, LocalExecutor, Task

CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
        "mode": "eager", "device": "cpu", "optimizer": None, "remat": "none", "order": None}


def env(**extra):
    base, _ = environment.worker_environment(reference.ReferenceAdapter(), "time")
    return {**base, **extra}


def refgrad(tmp_path, name):
    job = {"kind": "reference_gradient", "cell": CELL, "seed": 0, "out_path": str(tmp_path / f"{name}.npz")}
    return Task(job, env(), name, timeout_s=120)


def timed(name):
    job = {"kind": "time", "cell": CELL, "seed": 0, "warmup": 1, "repeat": 20, "time_budget_s": 0}
    return Task(job, env(), name, timeout_s=120, gated=True)


def working(task, outcome):
    """[(start, end)] during which the pass's process did work (a gated pass is idle
    between its "ready" and "go" marks)."""
    marks = dict((name, t) for t, name in outcome.marks)
    if "ready" in marks:
        return [(task.started, marks["ready"]), (marks["go"], task.ended)]
    return [(task.started, task.ended)]


def test_gated_passes_measure_alone_and_slots_are_kept(tmp_path):
    executor = LocalExecutor(str(tmp_path), slots=2)
    tasks = [refgrad(tmp_path, "a"), timed("t1"), refgrad(tmp_path, "b"), timed("t2"), refgrad(tmp_path, "c")]
    for task in tasks:
        executor.submit(task)
    done = list(executor.outcomes())
    assert sorted(t.name for t, _ in done) == sorted(t.name for t in tasks)
    assert all(outcome.ok for _, outcome in done), [o.message for _, o in done]
    spans = {task.name: working(task, outcome) for task, outcome in done}
    for task, outcome in done:
        if not task.gated:
            continue
        go = dict((n, t) for t, n in outcome.marks)["go"]
        for other, intervals in spans.items():
            if other == task.name:
                continue
            for start, end in intervals:  # nothing else works between its go and its end
                assert end <= go or start >= task.ended, (task.name, other, start, end, go, task.ended)
    # never more than 2 passes working at once
    edges = sorted([(s, 1) for iv in spans.values() for s, _ in iv] + [(e, -1) for iv in spans.values() for _, e in iv])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    assert peak <= 2


def test_cancel_all_from_a_signal_handler_kills_every_worker(tmp_path):
    executor = LocalExecutor(str(tmp_path), slots=2)
    hang = env(GRADMEM_TEST_PLANT="hang:start")  # each worker sleeps forever at its first mark
    for name in ("h1", "h2", "h3"):
        task = refgrad(tmp_path, name)
        task.env = hang
        executor.submit(task)
    pids = []

    def on_alarm(signum, frame):
        pids.extend(worker.pid for _, worker in executor.running.values())
        assert executor.cancel_all() == 2  # two running; the third never started

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        assert list(executor.outcomes()) == []  # a cancelled pass yields no outcome
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(pids) == 2
    for pid in pids:  # killed and reaped: the ids are gone, with their process groups
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    with pytest.raises(RuntimeError, match="cancelled"):
        executor.submit(refgrad(tmp_path, "late"))


def test_the_endgame_stops_a_hanging_pass_and_the_waiting_time_pass_measures(tmp_path):
    # A time pass waits at its gate beside a pass that never ends (a memory pass far
    # slower than its estimate): without the endgame it would wait for it forever.
    executor = LocalExecutor(str(tmp_path), slots=2)
    hang = refgrad(tmp_path, "hang")
    hang.env = env(GRADMEM_TEST_PLANT="hang:start")
    time_pass = timed("t")
    executor.submit(hang)
    executor.submit(time_pass)
    executor.endgame = lambda: any(worker.at_gate() for _, worker in executor.running.values())
    done = list(executor.outcomes())
    assert [(task.name, outcome.status) for task, outcome in done] == [("hang", STOPPED), ("t", "ok")]
    stopped = done[0][1]
    assert stopped.wall_s > 0 and not stopped.result  # it ran, was killed, and has no figures
    go = dict((n, t) for t, n in done[1][1].marks)["go"]
    assert hang.ended <= go  # it was gone before the time pass measured
