"""Which pass may start, and which waiting time pass may measure, now: the executor's rules.

One pure function (`next_moves`) that every executor on one machine follows, the
local one (executor.py) and the simulated GPU of the tests, so a rule changes in one
place and is tested without processes.

- An `exclusive` pass runs alone from start to end.
- A `gated` pass (a time pass) sets itself up beside others, then waits at its gate;
  it is released to measure when nothing else works (others may only wait at their
  own gates), and nothing starts while it measures. At most `slots` gated passes set
  up or wait at a time.
- At most `slots` passes work at once (a pass waiting at its gate does not count).
- **Waves.** The machine drains for a waiting time pass only when no ordinary pass is
  queued, or when `wave` time passes are waiting or queued. Draining costs every
  slot the rest of the longest running pass: on the H200 run, releasing a time pass
  as soon as it waited held 2-3 s of measuring behind 83-85 s of JAX memory passes,
  and 8 slots averaged 3.5 at work. Waiting for a wave pays that drain once per
  `wave` time passes. `wave` bounds what a stop loses too: a cell's record needs
  its time pass, so at most about `wave` cells are measured but unrecorded.
- **The endgame** (`endgame`, under a budget: the time left is what the time passes
  already submitted need to measure): every ordinary pass, running or queued, is
  stopped (`Moves.stop`: its cell is left for a later run), so the cells whose
  memory pass has ended get their time pass measured before the budget. Without it
  a memory pass slower than its estimate holds every waiting time pass back to the
  budget's end, and the cells they belong to are all lost.
- Passes start in submission order, except that an ordinary pass goes ahead of a
  gated one that waits for a set-up slot, and, while draining, gated set-ups go
  ahead of ordinary passes.
"""

from dataclasses import dataclass

#: time passes per wave, per slot (executor's `wave` = WAVE_PER_SLOT x slots)
WAVE_PER_SLOT = 4

#: what a running pass is doing now
WORKING, AT_GATE, ALONE = "working", "at gate", "alone"


@dataclass(frozen=True)
class Moves:
    release: object = None  # the waiting gated task to let measure now, or None
    start: tuple = ()  # pending tasks to start now, in this order
    draining: bool = False  # pass it to the next call: a wave, once begun, runs to its end
    stop: tuple = ()  # ordinary tasks, running or pending, to stop now (the endgame)


def next_moves(running, pending, slots, wave, draining=False, endgame=False):
    """`running`: [(task, phase)] with phase WORKING, AT_GATE or ALONE; `pending`: the
    queued tasks in submission order. Tasks have `.id`, `.gated`, `.exclusive`.
    `draining`: the previous call's `Moves.draining`. `endgame`: stop every ordinary
    pass so that the gated ones measure."""
    gated = sum(1 for task, _ in running if task.gated)
    queued_gated = sum(1 for task in pending if task.gated)
    if endgame and (gated or queued_gated):
        stop = tuple(task for task, _ in running if not task.gated) + tuple(t for t in pending if not t.gated)
        if stop:
            return Moves(stop=stop, draining=True)
    # A wave ends when its time passes have all measured; it begins when one waits and
    # no ordinary pass is queued, or a wave's worth of time passes waits or is queued.
    waiting = [task for task, phase in running if phase == AT_GATE]
    ordinary_queued = len(pending) - queued_gated
    if not (gated or queued_gated):
        draining = False
    elif waiting and (not ordinary_queued or gated + queued_gated >= wave):
        draining = True
    if any(task.exclusive or phase == ALONE for task, phase in running):
        return Moves(draining=draining)  # something measures alone: nothing starts
    working = len(running) - len(waiting)
    first_waiting = min(waiting, key=lambda task: task.id) if waiting else None
    if draining and waiting and not working:
        return Moves(release=first_waiting, draining=draining)
    start, busy = [], bool(running)
    for task in pending:
        if working >= slots:
            break
        if task.gated and gated >= slots:
            continue  # no set-up slot: ordinary passes behind it may go ahead
        if draining and not task.gated:
            continue  # draining: only set-ups of further time passes
        if task.exclusive:
            if busy:
                break  # it waits for the machine to empty; nothing behind it goes ahead
            return Moves(start=(task,), draining=draining)
        start.append(task)
        working, busy = working + 1, True
        gated += task.gated
    if not start and waiting and not working:  # nothing else can move (an exclusive pass waits)
        return Moves(release=first_waiting, draining=draining)
    return Moves(start=tuple(start), draining=draining)
