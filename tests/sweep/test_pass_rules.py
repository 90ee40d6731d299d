"""The executor's rules (harness/sweep/pass_rules.py) on fake tasks: time passes measure
alone, and the machine drains for them a wave at a time."""

import itertools
from dataclasses import dataclass, field

from harness.sweep.pass_rules import ALONE, AT_GATE, WORKING, next_moves

_ids = itertools.count()


@dataclass(eq=False)
class T:
    name: str
    gated: bool = False
    exclusive: bool = False
    id: int = field(default_factory=_ids.__next__)


def names(tasks):
    return [task.name for task in tasks]


def test_a_waiting_time_pass_is_released_only_when_nothing_else_works():
    m, t = T("m"), T("t", gated=True)
    assert next_moves([(m, WORKING), (t, AT_GATE)], [], slots=2, wave=8).release is None
    assert next_moves([(t, AT_GATE)], [], slots=2, wave=8).release is t
    # the first waiting one (submission order) goes first
    t2 = T("t2", gated=True)
    assert next_moves([(t2, AT_GATE), (t, AT_GATE)], [], slots=2, wave=8).release is t
    # while one measures alone nothing starts, not even a queued memory pass
    assert next_moves([(t, ALONE)], [T("m2")], slots=2, wave=8).start == ()


def test_memory_passes_keep_the_slots_busy_while_fewer_than_a_wave_of_time_passes_wait():
    t = T("t", gated=True)
    queued = [T("m1"), T("m2"), T("m3")]
    moves = next_moves([(t, AT_GATE)], queued, slots=2, wave=8)
    # the waiting time pass does not hold a slot: two memory passes start beside it
    assert moves.release is None and names(moves.start) == ["m1", "m2"]


def test_the_machine_drains_once_a_wave_of_time_passes_waits_or_no_memory_pass_is_queued():
    waiting = [(T(f"t{i}", gated=True), AT_GATE) for i in range(2)]
    m = T("m", gated=False)
    # a wave of 2: the memory pass queued behind does not start, so the machine drains
    assert next_moves([(T("busy"), WORKING)] + waiting, [m], slots=4, wave=2).start == ()
    # nothing ordinary queued: draining, but further time passes may set up meanwhile
    t_next = T("t-next", gated=True)
    assert names(next_moves([(T("busy"), WORKING)] + waiting, [t_next], slots=4, wave=8).start) == ["t-next"]
    # a wave of 0 is the old rule: drain as soon as one time pass waits
    assert next_moves([(T("busy"), WORKING), waiting[0]], [m], slots=4, wave=0).start == ()


def test_a_memory_pass_goes_ahead_of_a_time_pass_that_waits_for_a_set_up_slot():
    # two time passes hold both set-up slots (one setting up, one at its gate)
    gated = [(T("s0", gated=True), WORKING), (T("s1", gated=True), AT_GATE)]
    queued = [T("t-blocked", gated=True), T("m")]
    assert names(next_moves(gated, queued, slots=2, wave=8).start) == ["m"]


def test_an_exclusive_pass_waits_for_an_empty_machine_and_holds_the_queue_behind_it():
    ex, m = T("ex", exclusive=True), T("m")
    assert next_moves([(T("busy"), WORKING)], [ex, m], slots=4, wave=8).start == ()
    assert names(next_moves([], [ex, m], slots=4, wave=8).start) == ["ex"]
    # a time pass waiting at its gate is released first, so the exclusive pass is not stuck
    t = T("t", gated=True)
    assert next_moves([(t, AT_GATE)], [ex], slots=4, wave=8).release is t


def test_submission_order_is_kept_among_ordinary_passes():
    queued = [T("a"), T("b"), T("c")]
    assert names(next_moves([], queued, slots=2, wave=8).start) == ["a", "b"]
