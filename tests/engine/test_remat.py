"""Rematerialisation in the engine: every plan gives the plain gradients,
and each keeps what its math says it keeps.

Peaks are the ledger's (every buffer the engine holds, exactly), for chained_dot's
chain of n products z_{i+1} = x @ z_i of X bytes each, whose gradient wrt x needs
every z_i (the plain peak is n + 1 states).
"""

import functools
import math

import numpy as np
import pytest

from engine_cases import CASES
from harness import workloads
from harness.engine import ORDERS, Ledger, ops, value_and_grad
from harness.engine.remat import Plan, remat_plan
from harness.engine.remat_articulation import TooFewSeparators, find_separators, plan_articulation
from harness.engine.remat_revolve import first_sweep, griewank_recomputations, min_recomputations
from harness.engine.remat_simulate import simulate_chain
from harness.engine.tape import Leaf, Var
from harness.engine.trace import tracing
from harness.engine.testing import check_grads
from harness.frameworks import get as get_adapter
from harness.frameworks.base import Unavailable

PLANS = ["native", "sqrt", "revolve:1", "revolve:3"]
SEGMENT_CASES = [name for name in CASES if name.startswith(("checkpoint", "chain"))]


def under(plan, f):
    @functools.wraps(f)
    def planned(*args):
        with remat_plan(plan):
            return f(*args)

    return planned


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("name", SEGMENT_CASES)
def test_segments_under_every_plan_match_finite_differences_and_the_plain_gradient(name, plan, order):
    fn, args = CASES[name]
    f = functools.partial(fn, ops)
    check_grads(under(plan, f), *args, order=order)
    argnums = tuple(range(len(args)))
    plain = value_and_grad(lambda *a: ops.sum(f(*a)), argnums, order)(*args)
    remat = value_and_grad(under(plan, lambda *a: ops.sum(f(*a))), argnums, order)(*args)
    np.testing.assert_allclose(remat[0], plain[0], rtol=1e-13)
    for got, want in zip(remat[1], plain[1]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# ---- chained_dot's chain: counted steps, ledger peaks, the simulation -------------------
def chained_dot(n, D=24, seed=0):
    """(loss(params) running the chain and counting step calls, params, X bytes)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((D, D)) / math.sqrt(D)
    z = rng.standard_normal((D, D))
    calls = [0]

    def product(i, zi, consts):
        calls[0] += 1
        return ops.matmul(consts["x"], zi)

    def loss(params):
        return ops.sum(ops.chain(product, z, n, {"x": params["x"]}))

    loss.calls = calls
    return loss, {"x": x}, x.nbytes


def run(plan, loss, params, order="heap"):
    """(gradient, ledger peak, step evaluations) of one value-and-gradient under plan."""
    ledger = Ledger()
    loss.calls[0] = 0
    with remat_plan(plan):
        _, grads = value_and_grad(loss, order=order, ledger=ledger)(params)
    return grads["x"], ledger.peak_bytes, loss.calls[0]


def test_sqrt_on_64_products_keeps_at_most_2_5_sqrt_L_states_as_simulated():
    L = 64
    loss, params, X = chained_dot(L)
    plain, plain_peak, _ = run("none", loss, params)
    grad, peak, steps = run("sqrt", loss, params)
    np.testing.assert_allclose(grad, plain, rtol=1e-12)
    # Chen et al.: sqrt(L) = 8 boundaries kept, one 8-step segment recomputed and stored
    # at a time, so about 2 sqrt(L) states; the bound is 2.5 sqrt(L) states plus
    # 3 buffers (x's gradient accumulator, the cotangent carried back, one fresh
    # cotangent). x and z_0 are the caller's: the ledger does not count inputs.
    assert peak <= (2.5 * math.sqrt(L) + 3) * X, peak / X
    assert plain_peak >= L * X  # the plain chain keeps every z_i (the workload's bound)
    # each step recomputed once, in its segment's backward pass
    assert steps == 2 * L
    predicted = simulate_chain("sqrt", L, X, X)
    assert abs(peak - predicted) <= 0.05 * predicted, (peak / X, predicted / X)


@pytest.mark.parametrize("plan", ["none", "native", "sqrt"])
def test_simulation_agrees_with_the_ledger_within_5_percent(plan):
    for n in (7, 30):
        loss, params, X = chained_dot(n, D=16)
        _, peak, _ = run(plan, loss, params)
        predicted = simulate_chain(plan, n, X, X)
        assert abs(peak - predicted) <= 0.05 * predicted, (plan, n, peak / X, predicted / X)


@pytest.mark.parametrize("n, snapshots", [(16, 1), (16, 2), (40, 2), (64, 3), (20, 19)])
def test_revolve_recomputes_exactly_the_predicted_steps_and_peaks_as_simulated(n, snapshots):
    loss, params, X = chained_dot(n, D=16)
    plain, _, _ = run("none", loss, params)
    grad, peak, steps = run(f"revolve:{snapshots}", loss, params)
    np.testing.assert_allclose(grad, plain, rtol=1e-12)
    # the forward pass evaluates each step once; the backward pass the schedule's
    # F(n, S + 1) advances and reversals, plus the last step again (run raw forward)
    assert steps - n == min_recomputations(n, snapshots) + 1
    predicted = simulate_chain(f"revolve:{snapshots}", n, X, X)
    assert abs(peak - predicted) <= 0.05 * predicted, (peak / X, predicted / X)
    # at most S states besides the input, x_{n-1} and 4 buffers in flight (the step's
    # recomputed output, the carried cotangent, x's gradient and the fresh cotangent)
    assert peak <= (snapshots + 1 + 4) * X + 1024


def test_more_snapshots_never_cost_more_steps_and_the_dp_is_griewanks_closed_form():
    for n in range(1, 60):
        counts = [min_recomputations(n, s) for s in range(0, 6)]
        assert counts == sorted(counts, reverse=True)
        for s in range(0, 6):
            assert counts[s] == griewank_recomputations(n, s), (n, s)
    # one snapshot slot (the input only): every state from the start, n(n-1)/2 steps
    assert min_recomputations(10, 0) == 45
    # the first sweep keeps one state per slot at most and ends next to the last step
    parts, last = first_sweep(64, 3)
    assert last == 63 and len(parts) <= 4
    assert [b for _, b, _ in parts[:-1]] == [a for a, _, _ in parts[1:]] and parts[-1][1] == last


# ---- articulation -------------------------------------------------------------------------
def planning_trace(loss, params):
    def trace():
        with tracing(None):
            return loss({k: Var(v, Leaf(v.shape, v.dtype)) for k, v in params.items()})

    return trace


def test_articulation_finds_the_chains_separators_and_lowers_the_peak():
    L = 64
    loss, params, X = chained_dot(L)
    articulation = plan_articulation(planning_trace(loss, params), "chained_dot L=64")
    # nodes 0..L-1 are z_1..z_L, node L the sum: every z_i with a consumer separates
    assert articulation.separators == list(range(L))
    assert len(articulation.snapshots) == 8
    plain, plain_peak, _ = run("none", loss, params)
    grad, peak, _ = run(Plan("articulation", articulation), loss, params)
    np.testing.assert_allclose(grad, plain, rtol=1e-12)
    # 8 snapshots, one span of 8 rebuilt at a time, and a few buffers in flight
    assert peak <= (2.5 * math.sqrt(L) + 4) * X < plain_peak, peak / X


def test_separators_are_nodes_no_edge_jumps_over():
    # 0 -> 1 -> 2 -> 3, plus a skip 0 -> 2: node 1 is jumped over, 0 and 2 are not
    nodes = [("a", 8, []), ("b", 8, [0]), ("c", 8, [1, 0]), ("loss", 8, [2])]
    assert find_separators(nodes) == [0, 2]


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_articulation_on_unet_refuses_naming_the_graph_and_the_skip_connections(size):
    problem = workloads.build("unet", size, "float32")
    loss = functools.partial(problem.loss, ops, inputs=problem.inputs)
    with pytest.raises(TooFewSeparators) as err:
        plan_articulation(planning_trace(lambda p: loss(p), problem.params), f"unet at {size}")
    message = str(err.value)
    assert f"unet at {size}" in message and "separators" in message and "#11" in message
    assert isinstance(err.value, ValueError)
    # through the adapter, the refusal is Unavailable (a sweep records it as such)
    adapter = get_adapter("reference").load("cpu", "eager", "articulation")
    with pytest.raises(Unavailable, match="unet"):
        adapter.prepare(problem.loss, problem.params, problem.inputs, name=f"unet at {size}")


def test_articulation_needs_a_plan_and_the_same_graph():
    loss, params, _ = chained_dot(8, D=4)
    with pytest.raises(ValueError, match="plan_articulation"):
        run("articulation", loss, params)
    articulation = plan_articulation(planning_trace(loss, params), "chained_dot L=8")
    other, _, _ = chained_dot(3, D=4)  # fewer nodes than planned
    longer = lambda p: ops.exp(other(p))  # noqa: E731  (a different node where the sum was)
    longer.calls = other.calls
    with pytest.raises(RuntimeError, match="same graph"):
        run(Plan("articulation", articulation), longer, params)


def test_a_segment_reading_a_traced_array_from_a_closure_is_refused():
    def loss(p):
        with remat_plan("sqrt"):  # p["w"] reaches the segment through the closure
            return ops.sum(ops.checkpoint(lambda u: ops.mul(u, p["w"]), p["x"]))

    with pytest.raises(TypeError, match="pure"):
        value_and_grad(loss)({"x": np.ones((2, 2)), "w": np.ones((2, 2))})
