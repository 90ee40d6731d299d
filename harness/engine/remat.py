"""Rematerialisation: the ``checkpoint`` and ``chain`` ops and the plan they follow.

A workload marks its segments once (harness/remat_strategies.py states the contract):
``checkpoint(f, *xs)`` is one segment, ``chain(step, x, n, consts)`` a chain of n
steps. What the engine does with them depends on the plan in force, set around the
forward pass with ``with remat_plan("sqrt"): ...`` (the adapter does it):

- ``none``: the plain call and the plain loop; every step saves what its VJPs need.
- ``sqrt`` (Chen et al. 2016) and ``native`` (the same, under the name the other
  adapters use for their own checkpoint APIs): a ``checkpoint`` segment runs on raw
  values, so nothing inside it is saved; its node keeps only its inputs (by
  reference) and its VJP re-runs it traced and backpropagates through that sub-graph.
  A chain is cut into ceil(sqrt(n)) such segments, so it keeps the segment
  boundaries plus one segment's insides: O(sqrt(n)) states for n extra steps.
- ``revolve:S`` (Griewank & Walther's binomial checkpointing, remat_revolve.py): a
  chain keeps at most S states besides its input and recomputes the fewest steps that
  allows; ``checkpoint`` segments are recomputed as under sqrt.
- ``articulation`` (remat_articulation.py): the marks are ignored; snapshots are
  chosen from the graph's separators by a planning trace, and the nodes between two
  snapshots are recomputed from recipes in the backward pass.
"""

import contextlib

from harness.engine.backward import backward as backward_pass
from harness.engine.remat_node import one_node
from harness.engine.tape import Leaf, Var
from harness.engine.trace import current_ledger, current_order, tracing
from harness.engine.xp import array_module
from harness.remat_strategies import flatten, parse_remat, run_steps, segmented_chain


class Plan:
    """A parsed remat string, plus what planning found (articulation's snapshots)."""

    def __init__(self, text="none", articulation=None):
        self.text = text
        self.strategy, self.arg = parse_remat(text)
        self.articulation = articulation  # an ArticulationPlan, from plan_articulation

    def __repr__(self):
        return f"Plan({self.text!r})"


_plans = [Plan("none")]


@contextlib.contextmanager
def remat_plan(plan):
    """Run the body (a forward pass) under `plan`: a remat string, or a Plan (which
    articulation needs: ``Plan("articulation", plan_articulation(...))``)."""
    plan = plan if isinstance(plan, Plan) else Plan(plan)
    if plan.strategy == "articulation" and plan.articulation is None:
        raise ValueError(
            "remat 'articulation' needs the graph's plan: Plan('articulation', "
            "plan_articulation(trace)) (ReferenceAdapter.prepare makes it)"
        )
    _plans.append(plan)
    try:
        if plan.strategy == "articulation":
            from harness.engine.remat_articulation import recording_spans

            with recording_spans(plan.articulation):
                yield plan
        else:
            yield plan
    finally:
        _plans.pop()


def current_plan():
    return _plans[-1]


# ---- the ops ---------------------------------------------------------------------------
def checkpoint(f, *xs):
    """``f(*xs)``; under sqrt, native or revolve its insides are recomputed in the
    backward pass instead of saved."""
    if current_plan().strategy in ("none", "articulation"):
        return f(*xs)
    return recomputed(f, xs, "checkpoint")


def chain(step, x, n, consts):
    """``x_n`` for ``x_{i+1} = step(i, x_i, consts)``, saved according to the plan."""
    plan = current_plan()
    if plan.strategy in ("none", "articulation"):
        return run_steps(step, x, 0, n, consts)
    if plan.strategy == "revolve":
        from harness.engine.remat_revolve import revolve_chain

        return revolve_chain(step, x, n, consts, snapshots=plan.arg)
    return segmented_chain(step, x, n, consts, lambda segment: lambda *xs: recomputed(segment, xs, "chain_segment"))


# ---- a recomputed segment --------------------------------------------------------------
def recomputed(f, xs, name):
    """``f(*xs)`` as one node that saves only `xs` and recomputes `f` for its VJP.

    xs are arrays or flat dicts of arrays (traced or not). With nothing traced there
    is nothing to save, and it is the plain call.
    """
    args, rebuild = flatten(xs)
    traced = [i for i, a in enumerate(args) if type(a) is Var]
    if not traced:
        return f(*xs)
    raw = [a.value if type(a) is Var else a for a in args]
    out = f(*rebuild(raw))  # on raw values: ops record nothing (the ledger still counts)
    if type(out) is Var:
        raise TypeError(
            f"{name}: the segment {getattr(f, '__name__', f)!r} used a traced array it was "
            "not given; pass every array it reads as an argument (a segment must be pure)"
        )
    replay = _Replay(f, raw, rebuild, traced, current_ledger(), current_order(), current_plan())
    return one_node(name, [a.node if type(a) is Var else None for a in args], replay.backprop, out)


class _Replay:
    """The backward pass of a recomputed segment: re-run it traced from its saved
    inputs and backpropagate through it once, for all of them."""

    def __init__(self, f, raw, rebuild, traced, ledger, order, plan):
        self.f, self.raw, self.rebuild, self.traced = f, raw, rebuild, traced
        self.ledger, self.order, self.plan = ledger, order, plan

    def backprop(self, g):
        raw, self.raw = self.raw, None  # the saved inputs go once this pass has run
        leaves = {i: Leaf(raw[i].shape, raw[i].dtype) for i in self.traced}
        boxed = [Var(a, leaves[i]) if i in leaves else a for i, a in enumerate(raw)]
        del raw
        with tracing(self.ledger, "recompute", self.order), remat_plan(self.plan):
            out = self.f(*self.rebuild(boxed))
        del boxed
        root = out.node
        del out  # the recomputed output is not needed: only what its VJPs saved
        grads = backward_pass(root, g, list(leaves.values()), self.order, self.ledger)
        return {i: _zeros_if_none(grad, leaf, g, self.ledger) for (i, leaf), grad in zip(leaves.items(), grads)}


def _zeros_if_none(grad, leaf, like, ledger):
    if grad is not None:
        return grad
    zeros = array_module(like).zeros(leaf.shape, dtype=leaf.dtype)
    if ledger is not None:
        ledger.track(zeros, "backward:zeros")
    return zeros
