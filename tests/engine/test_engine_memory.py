"""The memory behaviour the engine promises, each measured through the ledger and held
against a bound derived from the math (the derivation sits next to each assertion).

Sizes: s = bytes of one activation-sized array in the test at hand; w = bytes of one
weight-sized (D, D) array; 4 bytes = one float32 scalar (the loss, the seed).
"""

import weakref

import numpy as np
import pytest

from harness.engine import ORDERS, Ledger, ops, value_and_grad, vjp
from harness.engine.backward import backward
from harness.engine.tape import Leaf, Var
from harness.engine.trace import tracing
from harness.engine.testing import tracemalloc_peak

F32 = np.float32
rng = np.random.default_rng(0)


def positive(*shape, dtype=F32):
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def live_at(ledger, tag):
    """Live bytes at the first timeline row tagged `tag` ("backward" = forward's end)."""
    return next(live for _, live, t in ledger.timeline if t == tag)


def backward_tags(ledger, keep):
    rows = ledger.timeline[[t for _, _, t in ledger.timeline].index("backward") :]
    return [t for _, _, t in rows if t in keep]


# ---- 1. a VJP saves only what it needs, and only for inputs that need a gradient ----------
#
# a, b: fresh traced arrays; c, d: fresh arrays that need no gradient. After the forward
# pass of sum(op(...)), the only engine buffers still alive are the ones op's node saved
# (sum saves a shape) and the 4-byte loss. "out" is op's output.
S, MM = (3, 4), dict(a=(3, 4), b=(4, 5), c=(3, 4), d=(4, 5))
CONV = dict(a=(2, 3, 5, 5), b=(4, 3, 3, 3), c=(2, 3, 5, 5), d=(4, 3, 3, 3))
MASK = rng.random(S) > 0.5
SAVES = {
    "add":            (lambda a, b, c, d: ops.add(a, c), "", {}),
    "sub":            (lambda a, b, c, d: ops.sub(c, a), "", {}),
    "neg":            (lambda a, b, c, d: ops.neg(a), "", {}),
    "mul x needs":    (lambda a, b, c, d: ops.mul(a, c), "c", {}),
    "mul y needs":    (lambda a, b, c, d: ops.mul(c, a), "c", {}),
    "mul both":       (lambda a, b, c, d: ops.mul(a, b), "a b", {}),
    "mul scalar":     (lambda a, b, c, d: ops.mul(a, 3.0), "", {}),
    "div x needs":    (lambda a, b, c, d: ops.div(a, c), "c", {}),
    "div y needs":    (lambda a, b, c, d: ops.div(c, a), "a out", {}),
    "div both":       (lambda a, b, c, d: ops.div(a, b), "b out", {}),
    "exp":            (lambda a, b, c, d: ops.exp(a), "out", {}),
    "sqrt":           (lambda a, b, c, d: ops.sqrt(a), "out", {}),
    "tanh":           (lambda a, b, c, d: ops.tanh(a), "out", {}),
    "sigmoid":        (lambda a, b, c, d: ops.sigmoid(a), "out", {}),
    "relu":           (lambda a, b, c, d: ops.relu(a), "out", {}),
    "log":            (lambda a, b, c, d: ops.log(a), "a", {}),
    "sin":            (lambda a, b, c, d: ops.sin(a), "a", {}),
    "cos":            (lambda a, b, c, d: ops.cos(a), "a", {}),
    "matmul a needs": (lambda a, b, c, d: ops.matmul(a, d), "d", MM),
    "matmul b needs": (lambda a, b, c, d: ops.matmul(c, b), "c", MM),
    "matmul both":    (lambda a, b, c, d: ops.matmul(a, b), "a b", MM),
    "sum":            (lambda a, b, c, d: ops.sum(a, axis=0), "", {}),
    "mean":           (lambda a, b, c, d: ops.mean(a, axis=1), "", {}),
    "max":            (lambda a, b, c, d: ops.max(a, axis=0), "a out", {}),
    "reshape":        (lambda a, b, c, d: ops.reshape(a, (4, 3)), "", {}),
    "permute_dims":   (lambda a, b, c, d: ops.permute_dims(a, (1, 0)), "", {}),
    "getitem":        (lambda a, b, c, d: ops.getitem(a, (slice(1, None), 0)), "", {}),
    "concat":         (lambda a, b, c, d: ops.concat([a, b, c]), "", {}),
    "stack":          (lambda a, b, c, d: ops.stack([a, b]), "", {}),
    "take":           (lambda a, b, c, d: ops.take(a, np.array([2, 0, 2])), "", {}),
    "where":          (lambda a, b, c, d: ops.where(MASK, a, c), "", {}),
    "softmax":        (lambda a, b, c, d: ops.softmax(a), "out", {}),
    "logsumexp":      (lambda a, b, c, d: ops.logsumexp(a), "a", {}),
    "conv2d x needs": (lambda a, b, c, d: ops.conv2d(a, d, padding=1), "d", CONV),
    "conv2d w needs": (lambda a, b, c, d: ops.conv2d(c, b, padding=1), "c", CONV),
    "max_pool2d":     (lambda a, b, c, d: ops.max_pool2d(a), "a out", dict(a=(1, 2, 4, 4))),
    "upsample2d":     (lambda a, b, c, d: ops.upsample2d(a), "", dict(a=(1, 2, 2, 2))),
    "cumsum":         (lambda a, b, c, d: ops.cumsum(a, 1), "", {}),
}  # fmt: skip


@pytest.mark.parametrize("name", SAVES)
def test_a_vjp_saves_only_what_it_needs(name):
    op, saved, shapes = SAVES[name]
    shapes = {k: shapes.get(k, S) for k in "abcd"}
    traced = {k: positive(*shapes[k]) for k in "ab"}
    plain = {k: positive(*shapes[k]) for k in "cd"}
    nbytes = {}

    def f(traced, plain):
        # engine buffers equal to v, made by an op whose output has no recipe (sum over
        # a length-1 axis): a cheap op's output could be kept as its operands instead
        fresh = {k: ops.sum(ops.reshape(v, (1, *v.shape)), axis=0) for k, v in {**traced, **plain}.items()}
        out = op(**fresh)
        nbytes.update({k: v.value.nbytes if isinstance(v, Var) else v.nbytes for k, v in fresh.items()})
        nbytes["out"] = out.value.nbytes
        return ops.sum(out)

    ledger = Ledger()
    loss, _ = vjp(f, traced, plain, ledger=ledger)
    expected = sum(nbytes[k] for k in saved.split())
    assert ledger.live_bytes - loss.nbytes == expected, ledger.live_by_tag()


# ---- 2. saved arrays go right after their node's VJP ------------------------------------


def test_saved_arrays_are_released_right_after_their_vjp():
    n, s = 8, 4 * 64

    def f(x):
        y = ops.mul(x, 1.0)
        for _ in range(n):
            y = ops.tanh(y)  # each tanh saves its own output: n saved arrays
        return ops.sum(y)

    ledger = Ledger()
    value_and_grad(f, ledger=ledger)(positive(64))
    assert live_at(ledger, "backward") == n * s + 4  # n saved outputs + the loss
    # Each tanh VJP allocates its cotangent and then releases its saved output, before
    # the next VJP runs: the rows alternate. (Releasing at the end of the pass would put
    # all n frees after the last VJP.)
    tags = backward_tags(ledger, {"backward:tanh", "free forward:tanh"})
    assert tags == ["backward:tanh", "free forward:tanh"] * n
    # So while the j-th tanh VJP runs (j = 1..n), live is: the n - j + 1 outputs not yet
    # released, its incoming and outgoing cotangents (2 s), the loss and the seed (8).
    rows = [live for _, live, t in ledger.timeline if t == "backward:tanh"]
    for j, live in enumerate(rows, start=1):
        assert live <= (n - j + 1) * s + 2 * s + 8


# ---- 3. an incoming cotangent goes once it has been passed on ------------------------------


def test_an_incoming_cotangent_is_dropped_once_passed_on():
    n, D = 10, 16
    s = 4 * 16 * D
    C = positive(D, D) / D  # the caller's constant: not the engine's, and matmul saves only it

    def f(x):
        y = x
        for _ in range(n):
            y = ops.matmul(y, C)
        return ops.sum(y)

    ledger = Ledger()
    _, g = value_and_grad(f, ledger=ledger)(positive(16, D))  # noqa: F841 (kept alive)
    # Nothing is saved, so forward holds at most y_{k-1} and y_k, and backward at most
    # the incoming g_k and the outgoing g_k C^T, plus the loss and the seed: 2 s + 8.
    # Holding every cotangent until the end would reach n s.
    assert ledger.peak_bytes <= 2 * s + 8
    # Each VJP makes its output while its input is alive, then the input goes, before
    # the next VJP runs (the first input is a view of the seed, the last output x's grad).
    tags = backward_tags(ledger, {"backward:matmul", "free backward:matmul"})
    assert tags == ["backward:matmul"] + ["backward:matmul", "free backward:matmul"] * (n - 1)


def test_an_elementwise_vjp_writes_over_the_cotangent_it_consumes():
    n, s = 10, 4 * 256
    c = positive(256) / 10  # the caller's constant: mul saves only it

    def f(x):
        y = x
        for _ in range(n):
            y = ops.exp(ops.mul(y, c))  # exp saves its output: n saved arrays
        return ops.sum(y)

    ledger = Ledger()
    _, g = value_and_grad(f, ledger=ledger)(positive(256))
    # The first cotangent is a read-only broadcast of the seed (sum's VJP), so exp's
    # first VJP allocates one array; from then on each VJP's incoming cotangent is the
    # pass's own and read by nobody else, and mul's and exp's VJPs are elementwise in
    # it: each writes its cotangent over it. One cotangent buffer for the whole pass,
    # which ends up as x's gradient.
    assert backward_tags(ledger, {"backward:exp", "backward:mul"}) == ["backward:exp"]
    assert ledger.live_bytes == 4 + g.nbytes  # the loss and the gradient
    # So the backward peak is the n saved outputs, that buffer, the loss and the seed:
    # the n + 1 arrays of a pass that allocates nothing per node.
    backward_rows = ledger.timeline[[t for _, _, t in ledger.timeline].index("backward") :]
    assert max(live for _, live, _ in backward_rows) == n * s + s + 8


# ---- 4. fan-in accumulates in place into one owned buffer (HIPS autograd #219) ------------


@pytest.mark.parametrize("order", ORDERS)
def test_rnn_holds_one_weight_sized_gradient_buffer_not_one_per_step(order):
    B, D, T = 2, 64, 12
    a, w = B * D * 4, D * D * 4
    W = (rng.standard_normal((D, D)) * 0.9 / np.sqrt(D)).astype(F32)
    b, x = positive(D), rng.standard_normal((B, D)).astype(F32)

    def rnn(W, b):
        h = x
        for _ in range(T):
            h = ops.tanh(ops.add(ops.matmul(h, W), b))
        return ops.sum(h)

    ledger = Ledger()
    value_and_grad(rnn, argnums=(0, 1), order=order, ledger=ledger)(W, b)
    forward_end = live_at(ledger, "backward")
    assert forward_end == T * a + 4  # the T hidden states (each saved by its tanh and
    # the next matmul: one buffer) and the loss
    # W receives T contributions dW_t = h_{t-1}^T g_t. The first is fresh and becomes
    # the accumulator; matmul's VJP adds each later one into it an eighth at a time
    # (prims.linalg.product_cotangent), so one W-sized buffer is live (plus w/8 inside NumPy,
    # which the ledger does not see), on top of the forward's T a, the cotangents in
    # flight (g, dh, dpre: 3 a) and b's gradient and its contribution (2 D*4).
    # Making each contribution whole before adding it would need 2 w; keeping them
    # apart (autograd before bb8c0bc), T w.
    assert ledger.peak_bytes <= forward_end + w + 3 * a + 2 * D * 4 + 4
    assert "backward:accumulate" not in backward_tags(ledger, {"backward:accumulate"})  # no copy
    # the VJPs that allocate: dW_T (the accumulator), dh_T .. dh_2 (x needs none)
    assert backward_tags(ledger, {"backward:matmul"}) == ["backward:matmul"] * T


# ---- 5. nodes that lead to no requested variable never run ---------------------------------


def test_ops_on_untraced_inputs_record_nothing_and_run_no_vjp():
    def f(x, z):
        unused = ops.exp(x)  # traced, but the loss does not depend on it  # noqa: F841
        zz = ops.tanh(ops.matmul(z, z))  # no traced input: computed, never recorded
        return ops.sum(ops.mul(x, zz))

    ledger = Ledger()
    value_and_grad(f, ledger=ledger)(positive(3, 3), positive(3, 3))
    assert ledger.vjp_calls == {"sum": 1, "mul": 1}
    assert backward_tags(ledger, {"backward:mul"}) == ["backward:mul"]  # x's side only


def test_backward_prunes_branches_that_reach_no_wanted_leaf():
    xv, yv = positive(4), positive(4)
    lx, ly = Leaf(xv.shape, xv.dtype), Leaf(yv.shape, yv.dtype)
    ledger = Ledger()
    with tracing(ledger):
        x, y = Var(xv, lx), Var(yv, ly)
        loss = ops.sum(ops.mul(ops.exp(x), ops.tanh(ops.sin(y))))
    # Both leaves are traced, only x is wanted: sin and tanh lead to y alone.
    [gx] = backward(loss.node, np.ones((), F32), [lx], "heap", ledger)
    assert ledger.vjp_calls == {"sum": 1, "mul": 1, "exp": 1}
    np.testing.assert_allclose(gx, np.exp(xv) * np.tanh(np.sin(yv)), rtol=1e-6)


# ---- 6. views are counted once ---------------------------------------------------------------


def test_views_are_counted_once():
    ledger = Ledger()

    def f(x):
        y = ops.mul(x, 2.0)  # one new (3, 4) buffer
        after_y = ledger.live_bytes
        views = [ops.reshape(y, (4, 3)), ops.permute_dims(y, (1, 0)), ops.getitem(y, (slice(1, None), 0)), y[None, ::2]]
        assert ledger.live_bytes == after_y == 48
        x_view = ops.reshape(x, (12,))  # a view of the caller's array is not the engine's
        assert ledger.live_bytes == after_y
        return ops.add(ops.sum(x_view), ops.sum(ops.stack([ops.sum(v) for v in views])))

    value_and_grad(f, ledger=ledger)(positive(3, 4))


# ---- 7. chained dot: the bound, and tracemalloc agrees ----------------------------------------


def chained_dot(L):
    def f(x, z):
        for _ in range(L):
            z = ops.matmul(x, z)
        return ops.sum(z)

    return f


def test_chained_dot_peak_is_the_saved_products_plus_three_buffers_and_tracemalloc_agrees():
    D, L = 200, 20
    m = D * D * 8  # one float64 (D, D) buffer
    x = rng.standard_normal((D, D)) / np.sqrt(D)
    z = rng.standard_normal((D, D))
    ledger = Ledger()
    (loss, g), traced_peak = tracemalloc_peak(value_and_grad(chained_dot(L), ledger=ledger), x, z)
    # z_i = x @ z_{i-1} (i = 1..L): x's gradient needs z_0 .. z_{L-1}, so z_1 .. z_{L-1}
    # are kept (z_0 is the caller's) and z_L is live while sum reads it: L buffers at the
    # end of the forward pass, the least a store-everything engine can hold.
    # Backward, product i's VJP first adds dx_i = g_i z_{i-1}^T into x's accumulator an
    # eighth at a time (after which z_{i-1}, needed by nothing else, goes), then makes
    # g_{i-1} = x^T g_i. Live while dx_i is added: z_1 .. z_{i-1}, the accumulator and
    # g_i, i + 1 buffers; while g_{i-1} is made: z_1 .. z_{i-2}, the accumulator, g_i
    # and g_{i-1}, again i + 1. At i = L there is no accumulator yet (dx_L becomes it)
    # and g_L is a view of the scalar seed. So the peak is L buffers, the bound itself
    # (the first bound was L saved + 3; making each dx_i whole costs one more).
    assert L * m <= ledger.peak_bytes <= L * m + 64
    # NumPy reports its buffers to tracemalloc: an independent count of the same bytes,
    # plus Python objects and transients inside NumPy calls. dx_i is added by one gemm
    # with beta = 1 (engine/blas.py), which makes no transient; without NumPy's CBLAS at
    # hand it is made a slab at a time: a slab of dx_i (an eighth of it, or fewer slabs
    # of at least common.MIN_SLAB_BYTES: at 320 KB, a quarter) and the contiguous copy
    # BLAS needs of the column slab it is made from.
    from harness.engine import blas
    from harness.engine.prims import common

    slab = m / max(1, min(common.SLABS, m // common.MIN_SLAB_BYTES))
    transients = 0 if blas.available() else 2 * slab
    assert abs(ledger.peak_bytes + transients - traced_peak) <= 0.02 * traced_peak
    # After the call only the loss and the one gradient buffer remain.
    assert ledger.live_bytes == loss.nbytes + g.nbytes


def test_conv2d_input_gradient_holds_x_bytes_plus_one_slab_of_transients():
    from harness.engine import xp
    from harness.engine.prims import conv

    n, c, o, h = 2, 16, 8, 64
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    out = conv.conv2d.forward(x, w, padding=1)
    g = rng.standard_normal(out.shape).astype(np.float32)
    dx, traced_peak = tracemalloc_peak(conv._conv2d_vjp_x(out, x, w, 1, 1), g)
    # x's gradient is the correlation of g (padded by kh - 1 - padding) with the flipped
    # kernel, made a slab of rows at a time straight into an x-shaped array: it holds
    # x's bytes, no padded buffer kept alive through a view.
    assert dx.shape == x.shape and xp.owner(dx).nbytes == x.nbytes
    # Beside it, per slab: the padded rows of g it reads (o channels, rows + kh of wp
    # pixels) and the wide result and one product term (c channels, rows of wp pixels),
    # each slab freed before the next is made; NumPy's array objects in the slack.
    wp = h + 2
    rows = max(s.stop - s.start for s in conv._row_slabs(h, n * max(c, o) * wp * 4))
    slab = n * o * (rows + 3) * wp * 4 + 2 * n * c * rows * wp * 4
    assert x.nbytes <= traced_peak <= x.nbytes + slab + 4096


def test_a_one_channel_conv_holds_its_output_plus_one_slab_of_windows():
    from harness.engine.prims import conv

    n, o, h = 2, 8, 64  # unet's first conv at small
    x = rng.standard_normal((n, 1, h, h)).astype(np.float32)
    w = rng.standard_normal((o, 1, 3, 3)).astype(np.float32)
    out, traced_peak = tracemalloc_peak(conv.conv2d.forward, x, w, 1, 1)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    np.testing.assert_allclose(out, np.einsum("nchwpq,ocpq->nohw", windows, w), rtol=1e-5, atol=1e-5)
    # Per slab of rows, freed before the next: its padded rows (one channel, rows + kh
    # of wp pixels), the nine windows side by side (9 rows of rows * wp) and the product
    # (o rows of rows * wp); the slab's height sized by the widest of those, nine rows.
    wp = h + 2
    rows = max(s.stop - s.start for s in conv._row_slabs(h, n * 9 * wp * 4))
    slab = n * (rows + 3) * wp * 4 + n * (9 + o) * rows * wp * 4
    assert out.nbytes <= traced_peak <= out.nbytes + slab + 4096


def test_a_node_makes_its_smallest_cotangent_first():
    # A conv's weight gradient is made before its input's, so the input's (the big one)
    # is not yet alive while the weight gradient's transients are: the order is the
    # parents' sizes, smallest first, whatever their argument order.
    from harness.engine.tape import defvjp, primitive

    made = []

    @primitive(n_arrays=2)
    def pair(big, small):
        return big * small.sum()

    def maker(name):
        def make(out, big, small):
            shape = big.shape if name == "big" else small.shape
            return lambda g: made.append(name) or np.ones(shape)

        return make

    defvjp(pair, maker("big"), maker("small"))
    value_and_grad(lambda a, b: ops.sum(pair(a, b)), argnums=(0, 1))(np.ones((64, 64)), np.ones(4))
    assert made == ["small", "big"]


# ---- 8. backward order: a Linear reused many times (PyTorch PR #4746) --------------------------


def linear(h, W, b):
    # W^T is taken at each use, as F.linear does: the node an execution order can delay.
    return ops.tanh(ops.add(ops.matmul(h, ops.permute_dims(W, (1, 0))), b))


def peaks_by_order(loss, W, b):
    peaks = {}
    for order in ORDERS:
        ledger = Ledger()
        value_and_grad(loss, argnums=(0, 1), order=order, ledger=ledger)(W, b)
        peaks[order] = ledger.peak_bytes
    return peaks


B, D, K = 2, 64, 8
A, Wb = B * D * 4, D * D * 4  # one activation, one weight (float32)
W0 = (rng.standard_normal((D, D)) * 0.9 / np.sqrt(D)).astype(F32)
b0 = (0.1 * rng.standard_normal(D)).astype(F32)
X = rng.standard_normal((K, B, D)).astype(F32)


def test_reused_linear_side_by_side_heap_peaks_lower_than_bfs():
    # The Linear applied to K inputs that sit side by side, the outputs then combined
    # (per-time-step projections, as in the PR's "real model"). Heap: T_k = W^T was
    # created just before its matmul M_k, so it has the next-highest creation number
    # and runs right after M_k: the first dW^T becomes W's accumulator, and every later
    # M_k adds its dW^T straight into it seen through T_k (backward._through_view), so
    # the peak is about K A (the tanh outputs) + w. BFS: the K branches are at the same
    # depth, so all K matmuls run before the first transpose ("BFS orders all
    # TBackward tasks at last"): no accumulator exists yet, K dW^T are pending
    # together, about K w. So bfs / heap is about K w / (K A + w) = 6.4 at these sizes.
    loss = lambda W, b: ops.mean(ops.stack([linear(X[k], W, b) for k in range(K)]))
    peaks = peaks_by_order(loss, W0, b0)
    assert abs(peaks["heap"] - (K * A + Wb)) <= 4 * A
    assert abs(peaks["bfs"] - K * Wb) <= 4 * A
    assert peaks["dfs"] == peaks["heap"]  # LIFO also runs each T_k right after M_k here
    predicted = K * Wb / (K * A + Wb)
    assert peaks["bfs"] / peaks["heap"] == pytest.approx(predicted, rel=0.1)


def test_reused_linear_in_a_chain_has_the_same_peak_in_every_order():
    # The same Linear applied as a chain, h_k = linear(h_{k-1}), as in the shared_linear
    # workload. Here no order can hold two dW^T: T_k's only consumer is M_k, and M_k's
    # VJP is the only thing that can produce the next dW^T (from M_{k-1}) only after
    # the chain has gone through tanh_{k-1}, which every order reaches after T_k (heap:
    # T_k has the higher creation number; FIFO: T_k was queued right after tanh_{k-1};
    # LIFO: T_k was queued last). So W's accumulator exists from the second use on,
    # each later dW^T is added straight into it, and every order peaks at the same
    # bytes: the accumulator (w) on top of the activations. The PR's effect needs uses
    # side by side (the test above).
    def loss(W, b):
        h = X[0]
        for _ in range(K):
            h = linear(h, W, b)
        return ops.mean(ops.mul(h, h))

    peaks = peaks_by_order(loss, W0, b0)
    assert peaks["heap"] == peaks["bfs"] == peaks["dfs"]
    assert abs(peaks["heap"] - (K * A + Wb)) <= 4 * A


# ---- 9. the graph is released by backward ---------------------------------------------------


def test_backward_releases_the_graph_and_every_saved_array():
    ledger = Ledger()
    nodes = []

    def f(x):
        y = ops.tanh(ops.mul(x, 1.0))
        nodes.append(weakref.ref(y.node))
        return ops.sum(ops.exp(y))

    loss, backward_fn = vjp(f, positive(5), ledger=ledger)
    assert nodes[0]() is not None and ledger.live_bytes > loss.nbytes  # saved: tanh's, exp's outputs
    g = backward_fn()
    assert nodes[0]() is None
    assert ledger.live_bytes == loss.nbytes + g.nbytes


def test_a_step_makes_no_reference_cycles_and_leaves_the_collector_as_it_was():
    # The engine pauses Python's cyclic collector while it traces and runs backward
    # (api.collector_paused): that is free of memory cost only if nothing it makes
    # needs the collector. So a step with the collector off leaves nothing for it, on
    # the workloads with the most graph structure (recurrences, skips, recipes).
    import gc

    from harness import workloads

    for name in ("seq2seq_attention", "unet", "tiny_nerf", "transformer_block"):
        problem = workloads.build(name, "tiny", "float32")
        step = value_and_grad(lambda params: problem.loss(ops, params, problem.inputs), ledger=Ledger())
        gc.collect()
        gc.disable()
        try:
            step(problem.params)
        finally:
            found = gc.collect()
            gc.enable()
        assert found == 0, name
        step(problem.params)
        assert gc.isenabled()


def test_the_collector_is_paused_from_forward_to_backward_and_resumes_however_the_pass_ends():
    # Re-enabled between the forward and the backward pass, the collector would walk the
    # whole recorded graph at the next allocation (thousands of nodes and closures:
    # ~2 ms of seq2seq_attention's ~20 ms step at small). So one vjp holds it off until
    # its backward has run; every other way a pass can end must give it back.
    import gc

    from harness import workloads

    problem = workloads.build("seq2seq_attention", "tiny", "float32")
    f = lambda params: problem.loss(ops, params, problem.inputs)
    walked = []  # objects in the youngest generation at each collection during the step
    callback = lambda phase, info: walked.append(len(gc.get_objects(0))) if phase == "start" else None
    assert gc.isenabled()
    gc.collect()
    gc.callbacks.append(callback)
    try:
        loss, backward_fn = vjp(f, problem.params)
        graph_objects = gc.get_count()[0]  # allocated since the collect and alive: the graph
        assert not gc.isenabled()  # between the passes
        backward_fn()
    finally:
        gc.callbacks.remove(callback)
    assert gc.isenabled()
    # the graph, even at tiny, is thousands of objects; a collection after the pass
    # (the allocation count is not back at 0) finds only what the step leaves alive
    assert graph_objects > 2000
    assert all(n < 700 for n in walked), walked

    _, backward_fn = vjp(f, problem.params)  # dropped unrun
    del backward_fn
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        vjp(lambda x: 1 / 0, positive(3))
    assert gc.isenabled()
    with pytest.raises(TypeError):
        vjp(lambda x: ops.reshape(np.arange(3), (3,)), positive(3))  # not a floating output
    assert gc.isenabled()
    _, backward_fn = vjp(lambda x: ops.mul(x, 2.0), positive(3))
    with pytest.raises(ValueError):
        backward_fn()  # a non-scalar output needs a seed
    assert gc.isenabled()
    with pytest.raises(ValueError) as raised:
        value_and_grad(lambda x: ops.mul(x, 2.0))(positive(3))  # not a scalar
    assert gc.isenabled(), raised  # (the traceback still held)
    # nested passes: the collector resumes with the last one
    _, first = vjp(f, problem.params)
    _, second = vjp(f, problem.params)
    first()
    assert not gc.isenabled()
    second()
    assert gc.isenabled()


# ---- 10. tiny_nerf: each saved byte, and the step peak, against what the math needs ----------


def test_tiny_nerf_keeps_what_its_vjps_need_and_peaks_one_activation_above_it():
    # At paper size the reference engine once peaked above torch on tiny_nerf (a
    # relu VJP made a fresh cotangent and a mask beside the incoming one). At `small`
    # (N = 2048 samples, W = 128 wide, E = 39 encoded features; f = 4 bytes) the same
    # structure runs in about a second.
    from harness import workloads

    problem = workloads.build("tiny_nerf", "small", "float32")
    cfg = workloads.get("tiny_nerf").SIZES["small"]
    R, N, W, E, f = cfg["rays"], cfg["rays"] * cfg["samples"], cfg["width"], 39, 4
    A = N * W * f  # one hidden activation
    P = sum(v.nbytes for v in problem.params.values())  # the gradients, all of them
    ledger = Ledger()
    loss = lambda params: problem.loss(ops, params, problem.inputs)
    (value, grads), traced = tracemalloc_peak(value_and_grad(loss, ledger=ledger), problem.params)

    # Saved at the end of the forward pass, one count per buffer:
    # - the MLP: h_1 .. h_8 (each relu's output, which relu's VJP and the next matmul's
    #   weight gradient both read): 8 N W f. The encoding (layer 0's matmul input, E
    #   features) is not kept: it is made from the inputs alone, by cheap prims, so it is
    #   kept as its recipe (the caller's points, sin and cos of them) and layer 0's and
    #   layer 5's weight gradients remake it a part of 3 features at a time. The skip
    #   concatenation [h_5, encoding] (layer 5's matmul input) is kept as its parts too;
    # - the rendering, per sample: sigma (relu's output), rgb (3, sigmoid's) and the two
    #   exp outputs e = exp(-sigma delta) and T: 6 N f. alpha = 1 - e and the weights
    #   alpha T, which mul's VJPs read, are remade from e and T. Per ray the pixel error
    #   (3 R f, the square's operand); and the 4-byte loss.
    saved_mlp = N * f * 8 * W
    forward_end = saved_mlp + 6 * N * f + 3 * R * f + 4
    assert live_at(ledger, "backward") == forward_end, ledger.live_by_tag()
    # The peak: going down layer k, relu's and add's VJPs write over the incoming
    # cotangent (A) and matmul's makes the next one (A) while h_1 .. h_k are saved, h_{k+1}
    # already released: at most saved_mlp + A. At the output layer the raw outputs'
    # cotangent (4 N f) is still live beside them. Plus the gradients made so far (at
    # most P) and the seed. The forward pass peaks at the last hidden layer with h_1 ..
    # h_7, the matmul's output and the bias add's (saved_mlp + A as well), and the skip
    # concatenation (N f (W + E)), which no VJP keeps but the loss's loop variable holds
    # while the second segment runs.
    backward_extra = 4 * N * f + 6 * N * f + 3 * R * f + P + 8
    bound = saved_mlp + A + max(backward_extra, N * f * (W + E))
    assert ledger.peak_bytes <= bound, (ledger.peak_bytes - bound) / A
    # tracemalloc also sees what the ledger cannot: transients inside VJPs (relu's mask
    # and a weight gradient's added product, each made an eighth at a time: A/32 and
    # W^2 f/8) and the graph's Python objects (~80 KiB here). A whole activation-sized
    # transient (as the mask was) would exceed A/4.
    assert traced <= ledger.peak_bytes + A / 4, (traced - ledger.peak_bytes) / A
    # After backward: the loss and the gradients, nothing else.
    assert ledger.live_bytes == value.nbytes + P == value.nbytes + sum(g.nbytes for g in grads.values())


# ---- 11. a copy, view or sum of arrays kept anyway costs nothing more (saving.py) ------------


def _saved_at_forward_end(f, *args):
    """(bytes saved at the end of f's forward pass, the ledger, the pending backward)."""
    ledger = Ledger()
    loss, backward_fn = vjp(f, *args, ledger=ledger)
    return ledger.live_bytes - loss.nbytes, ledger, backward_fn


def test_a_concatenation_of_saved_arrays_is_kept_as_its_parts():
    # w's gradient reads concat([h, b]); h = tanh(a) is saved by tanh's VJP and b is the
    # caller's, so the (N, 5) concatenation is not kept: only h (N, 3).
    N = 64
    a, b, w = positive(N, 3), positive(N, 2), positive(5, 4)
    f = lambda p: ops.sum(ops.matmul(ops.concat([ops.tanh(p["a"]), b], axis=-1), p["w"]))
    saved, _, _ = _saved_at_forward_end(f, {"a": a, "w": w})
    assert saved == N * 3 * 4


def test_an_upsampled_map_is_kept_as_the_map():
    # The conv's weight gradient reads the (1, 2, 16, 16) upsampled map; its (1, 2, 8, 8)
    # source is saved by tanh's VJP, so nothing else is kept: 4x fewer bytes.
    x, w = positive(1, 2, 8, 8), positive(3, 2, 3, 3)
    f = lambda p: ops.sum(ops.conv2d(ops.upsample2d(ops.tanh(p["x"]), 2), p["w"], padding=1))
    saved, _, _ = _saved_at_forward_end(f, {"x": x, "w": w})
    assert saved == x.nbytes


def test_a_gru_difference_is_remade_and_a_gate_slice_kept_compact():
    # One GRU-like step: n = tanh(gi + r * gh[:, 2H:]), h' = n + z * (h - n). The VJPs
    # read h (the caller's here), r, z, n (their own outputs) and, for r's gradient,
    # gh's last third: kept as a compact (B, H) copy, not the (B, 3H) product; h - n
    # (z's gradient) is remade from h and n. Saved: r, z, n and the slice: 4 B H f.
    B, H = 8, 16
    h, U, gi, a, c = positive(B, H), positive(H, 3 * H), positive(B, H), positive(B, H), positive(B, H)

    def step(p):
        U, a, c = p["U"], p["a"], p["c"]
        gh = ops.matmul(h, U)
        r, z = ops.sigmoid(a), ops.sigmoid(c)
        n = ops.tanh(ops.add(gi, ops.mul(r, ops.getitem(gh, (Ellipsis, slice(2 * H, 3 * H))))))
        return ops.sum(ops.add(n, ops.mul(z, ops.sub(h, n))))

    saved, ledger, _backward = _saved_at_forward_end(step, {"U": U, "a": a, "c": c})
    assert saved == 4 * B * H * 4, ledger.live_by_tag()
    assert ledger.live_by_tag().get("forward:getitem") == B * H * 4  # the compact copy


def test_an_encoding_of_the_inputs_is_remade_for_the_weight_gradients_it_feeds():
    # As tiny_nerf's positional encoding: e = [x, sin(2x), cos(2x)] is made from the
    # caller's x alone (no node is recorded), and both weight gradients read it, layer
    # 2's through the concatenation [h, e]. e is kept as its recipe (x, which the
    # caller holds), so only h = tanh(e W1) is saved; each weight gradient remakes e a
    # part of x's width at a time. Gradients as with e kept (the float64 check).
    N, D, H = 32, 3, 8
    x, W1, W2 = positive(N, D, dtype=np.float64), positive(3 * D, H, dtype=np.float64), positive(H + 3 * D, 2, dtype=np.float64)

    def f(p):
        scaled = ops.mul(x, 2.0)
        e = ops.concat([x, ops.sin(scaled), ops.cos(scaled)], axis=-1)
        h = ops.tanh(ops.matmul(e, p["W1"]))
        return ops.sum(ops.matmul(ops.concat([h, e], axis=-1), p["W2"]))

    saved, ledger, backward_fn = _saved_at_forward_end(f, {"W1": W1, "W2": W2})
    assert saved == N * H * 8, ledger.live_by_tag()
    grads = backward_fn()
    e = np.concatenate([x, np.sin(2 * x), np.cos(2 * x)], axis=-1)
    h = np.tanh(e @ W1)
    g_h = np.ones((N, 2)) @ W2[:H].T
    np.testing.assert_allclose(grads["W2"], np.concatenate([h, e], axis=-1).T @ np.ones((N, 2)), rtol=1e-12)
    np.testing.assert_allclose(grads["W1"], e.T @ (g_h * (1 - h * h)), rtol=1e-12)


def test_a_slice_of_the_callers_array_is_kept_as_the_view():
    # x_k = x[k] of the caller's (K, B, D) array is a view: keeping it costs the
    # engine nothing (the caller holds x), so it is never copied (as shared_linear).
    x, W = positive(4, 8, 5), positive(5, 3)
    saved, _, _ = _saved_at_forward_end(lambda p: ops.sum(ops.matmul(ops.getitem(x, 1), p["W"])), {"W": W})
    assert saved == 0


def test_the_ledger_says_why_each_saved_buffer_is_kept():
    # h = relu(x @ w1) is read by relu's VJP and by w2's gradient: one buffer, two reasons.
    x, w1, w2 = positive(16, 8), positive(8, 32), positive(32, 4)
    f = lambda p: ops.sum(ops.matmul(ops.relu(ops.matmul(x, p["w1"])), p["w2"]))
    saved, ledger, _backward = _saved_at_forward_end(f, {"w1": w1, "w2": w2})
    kept = ledger.kept_for()
    assert [(tag, nbytes) for tag, nbytes, _ in kept] == [("forward:relu", 16 * 32 * 4)] == [(tag, saved) for tag, _, _ in kept]
    assert sorted(kept[0][2]) == ["matmul: b's gradient a^T g", "relu: g (out > 0)"]


# ---- 12. an elementwise op writes over a temporary nothing else reaches (tape.donated) -------


def test_this_interpreter_lets_the_engine_tell_a_temporary_apart():
    # measured at import (tape._calibrate); None would switch donation off everywhere
    from harness.engine import tape

    assert tape._TEMPORARY_REFS is not None


def test_a_dense_relu_layer_holds_one_activation_in_its_forward_pass():
    # relu(add(matmul(x, w), b)): the product is a temporary, the bias add writes over it
    # and relu over that, so the layer's forward pass holds one (N, D) array, where out
    # of place it would hold two (the product and the sum, then the sum and relu's).
    N, D = 64, 32
    x, w, b = positive(N, 16), positive(16, D), positive(D)
    ledger = Ledger()
    f = lambda p: ops.sum(ops.relu(ops.add(ops.matmul(x, p["w"]), p["b"])))
    value_and_grad(f, ledger=ledger)({"w": w, "b": b})
    A = N * D * 4
    assert live_at(ledger, "backward") == A + 4  # relu's output, saved, and the loss
    forward = ledger.timeline[: [t for _, _, t in ledger.timeline].index("backward")]
    assert max(live for _, live, _ in forward) <= A + 4  # never two activations at once
    assert [t for _, _, t in forward if t.startswith("forward:")] == ["forward:matmul", "forward:sum"]


def test_a_value_still_reachable_is_never_written_over():
    # A Var a name holds, a Var whose array a VJP saved (exp's output), and an array a
    # view shares: all read again after the op, so all must keep their values.
    a, b = positive(3, 4), positive(3, 4)

    def f(p):
        h = ops.matmul(p["a"], ops.permute_dims(p["b"], (1, 0)))  # named: read again below
        e = ops.exp(ops.mul(h, 0.01))  # exp saves its output
        s = ops.tanh(ops.add(h, 1.0))
        v = ops.matmul(p["a"], ops.permute_dims(p["b"], (1, 0)))
        view = ops.getitem(v, (slice(None), 0))
        t = ops.neg(v)  # held by the name v and by the view
        return ops.sum(ops.add(ops.add(ops.add(ops.sum(h), ops.sum(e)), ops.sum(s)), ops.add(ops.sum(view), ops.sum(t))))

    value, grads = value_and_grad(f)({"a": a, "b": b})
    h = a @ b.T
    expected = h.sum() + np.exp(h * 0.01).sum() + np.tanh(h + 1).sum() + h[:, 0].sum() - h.sum()
    np.testing.assert_allclose(value, expected, rtol=1e-5)


def test_a_recipe_writes_a_slab_of_its_rows_straight_into_a_conv_slab():
    # A conv reading a concatenation or an upsampled map kept as a recipe remakes each
    # slab of rows into the slab's padded buffer directly (saving.copy_rows): the same
    # numbers as the whole map's rows, for every first row (upsampling's phase) and a
    # destination that is a strided view, as the padded buffer's inside is.
    from harness.engine import prims
    from harness.engine.saving import Rebuilt, copy_rows

    src = rng.standard_normal((2, 3, 5, 4))
    other = rng.standard_normal((2, 2, 10, 8))
    up = Rebuilt(prims.upsample2d, [src], (2,), {}, (2, 3, 10, 8), src.dtype)
    up_kw = Rebuilt(prims.upsample2d, [src], (), {"scale": 2}, (2, 3, 10, 8), src.dtype)
    cat = Rebuilt(prims.shapes._concat, [up, other], (), {"axis": 1}, (2, 5, 10, 8), src.dtype)
    for recipe in (up, up_kw, cat):
        whole = recipe.value()
        for lo in range(10):
            for hi in range(lo + 1, 11):
                padded = np.full((2, recipe.shape[1], hi - lo + 3, 8 + 2), np.nan)
                copy_rows(recipe, lo, hi, padded[:, :, 1 : hi - lo + 1, 1:9])
                np.testing.assert_array_equal(padded[:, :, 1 : hi - lo + 1, 1:9], whole[:, :, lo:hi])
                assert np.isnan(padded[:, :, 0]).all() and np.isnan(padded[..., 0]).all()  # nothing outside
