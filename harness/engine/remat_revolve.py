"""Binomial checkpointing of a chain (Griewank & Walther 2000, "Algorithm 799: revolve").

Reversing a chain of n steps needs each state x_i at the time step i's VJP runs. With
room for only c states at once, the fewest extra step evaluations is

    F(l, c) = min over 0 < m < l of  m + F(l - m, c - 1) + F(m, c),   F(1, c) = 0,
    F(l, 0) = infinity for l > 1,

(advance m steps from the held state and keep x_m; reverse the right part with one
slot fewer; then the left part), and Griewank's closed form gives the same number:
t(l, c) = r*l - beta(c + 1, r - 1), beta(c, r) = C(c + r, c), where r is the
repetition count with beta(c, r - 1) < l <= beta(c, r). `min_recomputations` is the
DP, `griewank_recomputations` the closed form; the tests check they agree.

Executed in the engine (`revolve_chain`), ``revolve:S`` holds the chain's input and at
most S other states (c = S + 1), plus x_{n-1}. The forward pass is the schedule's first
sweep, on raw values (nothing recorded): it keeps x_m at each split and x_{n-1}. The
chain is one node; its VJP runs the last step recorded from x_{n-1}, then reverses the
left part of each split, last first. The backward pass evaluates F(n, S + 1) + 1 steps
(the +1: the last step, run raw in the forward pass, runs again recorded): that is the
recompute count, the forward pass evaluating each step once as without remat.
"""

import functools
import math

from harness.engine.backward import backward as backward_pass
from harness.engine.remat_node import one_node, steps_raw, value_of
from harness.engine.xp import array_module
from harness.engine.tape import Leaf, Var
from harness.engine.trace import current_ledger, current_order, tracing


@functools.lru_cache(maxsize=None)
def _best(l, c):
    """(F(l, c), the split m achieving it); the largest such m (fewer states kept
    while the right part is reversed)."""
    if l == 1:
        return 0, None
    if c == 0:
        return math.inf, None
    best = (math.inf, None)
    for m in range(1, l):
        cost = m + _best(l - m, c - 1)[0] + _best(m, c)[0]
        if cost <= best[0]:
            best = (cost, m)
    return best


def _fill(n, c):
    for l in range(1, n + 1):  # the table bottom-up: no deep recursion
        _best(l, c)


def min_recomputations(n, snapshots):
    """F(n, S + 1): the extra step evaluations of revolve:S on n steps."""
    _fill(n, snapshots + 1)
    return _best(n, snapshots + 1)[0] if n else 0


def split(l, c):
    """How far to advance before keeping a state, reversing l steps with c slots."""
    return _best(l, c)[1]


def griewank_recomputations(n, snapshots):
    """The closed form t(n, c) of Griewank & Walther for c = S + 1 held states."""
    c = snapshots + 1
    if n <= 1:
        return 0
    r = 0
    while math.comb(c + r, c) < n:
        r += 1
    return r * n - math.comb(c + 1 + r - 1, c + 1) if r >= 1 else 0


def first_sweep(n, snapshots):
    """The forward pass's splits: ([(a, b, slots), ...], last). It keeps x_a of each
    part a..b (slots: the states it may hold while reversing it), the parts end to
    end from 0 to last = n - 1."""
    parts, a, c = [], 0, snapshots + 1
    _fill(n, c)
    while n - a > 1:
        b = a + split(n - a, c)
        parts.append((a, b, c))
        a, c = b, c - 1
    return parts, a


def revolve_chain(step, x, n, consts, snapshots):
    """The chain's output as one node whose VJP follows revolve:S."""
    if type(x) is not Var and not any(type(v) is Var for v in consts.values()):
        return steps_raw(step, x, 0, n, consts)  # nothing to differentiate
    if n <= 1:  # nothing to recompute
        return steps_raw(step, x, 0, n, consts) if n == 0 else step(0, x, consts)
    parts, last = first_sweep(n, snapshots)
    states, state = [], value_of(x)
    for a, b, _ in parts:
        states.append(state)  # kept for the backward pass
        state = steps_raw(step, state, a, b, consts)
    states.append(state)  # x_{n-1}: the state the last step is reversed from
    out = steps_raw(step, state, last, n, consts)
    del state
    reverser = _Reverser(step, consts, current_ledger(), current_order())
    parents = [x.node if type(x) is Var else None] + [v.node if type(v) is Var else None for v in consts.values()]
    backprop = functools.partial(reverser.reverse_chain, parts, last, states, type(x) is Var)
    return one_node("revolve_chain", parents, backprop, out)


class _Reverser:
    """Runs the backward part of the schedule; one per chain call."""

    def __init__(self, step, consts, ledger, order):
        self.step, self.ledger, self.order = step, ledger, order
        self.keys = list(consts)
        self.raw_consts = {k: value_of(v) for k, v in consts.items()}
        self.traced_consts = [k for k, v in consts.items() if type(v) is Var]
        self.const_grads = {}  # one buffer per const, accumulated in place
        self.g = None

    def reverse_chain(self, parts, last, states, x_traced, g):
        """The cotangents {0: x's, 1 + k: the k-th const's}: the last step from x_{n-1},
        then every part of the first sweep, last first, each from its kept state,
        which goes once it is done."""
        self.g = g  # the cotangent being carried back (an attribute: no frame keeps an old one)
        del g
        self.taped_step(last, states.pop())
        for a, b, c in reversed(parts):
            self.reverse(a, b, c, states.pop(), need_x=x_traced or a > 0)
        out = {0: self.g}
        self.g = None
        for k, key in enumerate(self.keys):
            if key in self.traced_consts:
                out[1 + k] = self.const_grads.pop(key, None)
                if out[1 + k] is None:  # the chain does not use this const
                    out[1 + k] = array_module(out[0]).zeros_like(self.raw_consts[key])
        return out

    def reverse(self, a, b, c, x_a, need_x=True):
        """Reverse steps a..b-1 holding x_a and at most c - 1 more states: self.g goes
        from the cotangent of x_b to that of x_a."""
        while b - a > 1:  # keep x_m, reverse the right part, then go on with the left
            m = a + split(b - a, c)
            with tracing(self.ledger, "recompute", self.order):  # accounted, not recorded
                x_m = steps_raw(self.step, x_a, a, m, self.raw_consts)
            self.reverse(m, b, c - 1, x_m)
            del x_m
            b = m
        self.taped_step(a, x_a, need_x)

    def taped_step(self, i, x_i, need_x=True):
        """Step i recorded from x_i and backpropagated: self.g becomes x_i's cotangent
        (None when not needed); the consts' cotangents are added to their buffers."""
        g, self.g = self.g, None
        leaves = {k: Leaf(self.raw_consts[k].shape, self.raw_consts[k].dtype) for k in self.traced_consts}
        boxed = {k: Var(v, leaves[k]) if k in leaves else v for k, v in self.raw_consts.items()}
        x_leaf = Leaf(x_i.shape, x_i.dtype) if need_x else None
        with tracing(self.ledger, "recompute", self.order):
            out = self.step(i, Var(x_i, x_leaf) if need_x else x_i, boxed)
        del boxed, x_i
        root = out.node
        del out  # only what the step's VJPs saved is needed, not its output
        wanted = ([x_leaf] if need_x else []) + list(leaves.values())
        grads = backward_pass(root, g, wanted, self.order, self.ledger)
        del g, root
        self.g = grads.pop(0) if need_x else None
        for key, ct in zip(leaves, grads):
            if ct is None:
                continue
            if key in self.const_grads:
                self.const_grads[key] += ct  # in place: one buffer per const
            else:
                self.const_grads[key] = ct
