"""The engine computes the right values and the right gradients.

Every case of engine_cases runs forward against a plain NumPy reference, and backward
against central finite differences (check_grads, float64) under every backward order.
Random programs with heavy fan-out and aliasing cotangents check in-place accumulation,
and the checker itself is shown to catch a wrong VJP.
"""

import functools
import inspect
import types

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from engine_cases import CASES, normal
from harness import ops as contract
from harness.frameworks import remat
from harness.engine import ORDERS, ops, value_and_grad
from harness.engine.tape import defvjp, primitive
from harness.engine.testing import check_grads


def test_the_engine_implements_the_contract_with_its_exact_signatures():
    assert contract.missing_ops(ops) == []
    for name, (signature, _) in contract.OPS.items():
        assert name + str(inspect.signature(getattr(ops, name))) == signature


def test_every_op_has_gradient_cases():
    for name in contract.OPS:
        assert any(case.startswith(name) for case in CASES), name


# ---- forward values against NumPy -------------------------------------------------------


def _np_conv2d(x, w, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwpq,ocpq->nohw", windows, w)


def _np_max_pool2d(x, size=2):
    return sliding_window_view(x, (size, size), axis=(2, 3))[:, :, ::size, ::size].max(axis=(-2, -1))


def _np_logsumexp(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


NUMPY = types.SimpleNamespace(
    add=np.add, sub=np.subtract, mul=np.multiply, div=np.true_divide, neg=np.negative,
    exp=np.exp, log=np.log, sqrt=np.sqrt, tanh=np.tanh, sigmoid=lambda x: 1 / (1 + np.exp(-x)),
    relu=lambda x: np.maximum(x, 0), sin=np.sin, cos=np.cos, matmul=np.matmul,
    sum=np.sum, mean=np.mean, max=np.max, reshape=np.reshape, permute_dims=np.transpose,
    concat=np.concatenate, stack=np.stack, getitem=lambda x, key: x[key],
    take=lambda x, indices, axis=0: np.take(x, indices, axis=axis),
    where=np.where, softmax=lambda x, axis=-1: np.exp(x - _np_logsumexp(x, axis, keepdims=True)),
    logsumexp=_np_logsumexp, conv2d=_np_conv2d, max_pool2d=_np_max_pool2d,
    upsample2d=lambda x, scale=2: x.repeat(scale, axis=2).repeat(scale, axis=3),
    cumsum=lambda x, axis: np.cumsum(x, axis=axis),
    checkpoint=remat.checkpoint, chain=remat.chain,
)  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_numpy(name):
    fn, args = CASES[name]
    np.testing.assert_allclose(fn(ops, *args), fn(NUMPY, *args), rtol=1e-12, atol=1e-12)


# ---- gradients against finite differences ------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name", CASES)
def test_gradient_matches_finite_differences(name, order):
    fn, args = CASES[name]
    check_grads(functools.partial(fn, ops), *args, order=order)


@pytest.mark.parametrize("name", CASES)
def test_gradient_through_a_cotangent_the_pass_owns(name):
    # check_grads seeds the output with its own array, which the pass must not write
    # into; behind a mul the incoming cotangent is a fresh array the pass owns, so the
    # elementwise VJPs (prims.common.reuses_g) write their cotangents over it.
    fn, args = CASES[name]
    check_grads(lambda *a: ops.mul(fn(ops, *a), 1.5), *args)


def test_a_wrong_vjp_is_caught():
    @primitive()
    def bad_sin(x):
        return np.sin(x)

    # HIPS autograd's test_tests: off by 0.1 %, which the check must not let through.
    defvjp(bad_sin, lambda out, x: lambda g: g * np.cos(x) * 1.001)
    x = normal(3, 2)
    check_grads(ops.sin, x)  # the right one passes
    with pytest.raises(AssertionError, match="gradient check failed for bad_sin"):
        check_grads(bad_sin, x)


def test_a_vjp_returning_the_wrong_shape_is_caught():
    @primitive(n_arrays=2)
    def add_without_unbroadcast(x, y):
        return np.add(x, y)

    defvjp(add_without_unbroadcast, lambda out, x, y: lambda g: g, lambda out, x, y: lambda g: g)
    f = lambda x, y: ops.sum(add_without_unbroadcast(x, y))
    with pytest.raises(RuntimeError, match=r"VJP of add_without_unbroadcast returned a float64\(3, 2\) cotangent for an input of float64\(2,\)"):
        value_and_grad(f, argnums=(0, 1))(normal(3, 2), normal(2))


# ---- ties and conventions ---------------------------------------------------------------


def test_max_shares_the_gradient_among_ties_like_torch_amax():
    _, g = value_and_grad(lambda x: ops.max(x))(np.array([1.0, 3.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5])


def test_max_pool2d_gives_a_tied_window_to_its_first_maximum_like_torch():
    x = np.zeros((1, 1, 2, 2))
    _, g = value_and_grad(lambda x: ops.sum(ops.max_pool2d(x)))(x)
    np.testing.assert_array_equal(g[0, 0], [[1.0, 0.0], [0.0, 0.0]])


def test_relu_gradient_is_zero_at_zero():
    _, g = value_and_grad(lambda x: ops.sum(ops.relu(x)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, layout", [((2, 8, 64, 64), "contiguous"), ((3, 1000), "contiguous"),
                                           ((64, 512), "transposed"), ((4, 256), "into itself")])
def test_relu_forward_is_numpys_maximum_with_zero_whatever_the_layout(dtype, shape, layout):
    # relu takes a contiguous array of whole rows against a cached row of zeros (faster
    # than the scalar 0); the numbers must be maximum's, NaN, -0.0 and infinities included.
    from harness.engine.prims import elementwise

    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    x.flat[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -1e-30]
    x = x.T if layout == "transposed" else x
    expected = np.maximum(x, 0)
    got = elementwise._relu_into(x, out=x) if layout == "into itself" else elementwise.relu.forward(x)
    assert got.dtype == dtype and got.shape == expected.shape and (got.base is None or got is x)
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))  # the same zero where x was -0.0


@pytest.mark.parametrize("stride, padding", [(1, 0), (1, 1), (2, 1)])
def test_conv2d_pool_and_upsample_agree_with_torch(stride, padding):
    torch = pytest.importorskip("torch")
    x, w = normal(2, 3, 8, 6), normal(4, 3, 3, 3)

    def engine_loss(x, w):
        y = ops.conv2d(x, w, stride=stride, padding=padding)
        return ops.sum(ops.mul(ops.upsample2d(ops.max_pool2d(ops.relu(y)), 2), y[:, :, : 2 * (y.shape[2] // 2), : 2 * (y.shape[3] // 2)]))

    loss, (gx, gw) = value_and_grad(engine_loss, argnums=(0, 1))(x, w)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    h, wd = 2 * (ty.shape[2] // 2), 2 * (ty.shape[3] // 2)
    up = torch.nn.functional.interpolate(torch.nn.functional.max_pool2d(torch.relu(ty), 2), scale_factor=2, mode="nearest")
    tloss = (up * ty[:, :, :h, :wd]).sum()
    tloss.backward()
    np.testing.assert_allclose(loss, tloss.item(), rtol=1e-10)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-9, atol=1e-10)


# ---- random programs: fan-out, aliasing cotangents, in-place accumulation ----------------

MASK = np.random.default_rng(5).random((3, 4)) > 0.5
STEPS = {
    "add": lambda ops, a, b: ops.add(a, b),  # passes g to both: borrowed cotangents
    "sub": lambda ops, a, b: ops.sub(a, b),
    "mul": lambda ops, a, b: ops.tanh(ops.mul(a, b)),
    "reshape": lambda ops, a, b: ops.reshape(ops.reshape(a, (4, 3)), (3, 4)),  # views of g
    "transpose": lambda ops, a, b: ops.permute_dims(ops.permute_dims(a, (1, 0)), (1, 0)),
    "slices": lambda ops, a, b: ops.concat([ops.getitem(a, slice(0, 2)), ops.getitem(b, slice(2, None))]),
    "take": lambda ops, a, b: ops.take(a, np.array([0, 0, 2]), axis=0)[:, :] * 0.5 + b[0:3],
    "sum": lambda ops, a, b: ops.add(a, ops.sum(b, axis=0, keepdims=True)),  # broadcast view
    "where": lambda ops, a, b: ops.where(MASK, a, b),
    "sin": lambda ops, a, b: ops.sin(a),
    "same": lambda ops, a, b: ops.mul(a, a),
}


def random_program(seed, n_steps=14):
    rng = np.random.default_rng(seed)
    program = [(rng.choice(list(STEPS)), rng.integers(0, 2 + k), rng.integers(0, 2 + k)) for k in range(n_steps)]
    weights = rng.standard_normal(n_steps + 2)

    def f(x, y):
        values = [x, y]
        for kind, i, j in program:
            values.append(STEPS[kind](ops, values[i], values[j]))
        loss = 0.0  # every value feeds the loss: maximal fan-out
        for value, c in zip(values, weights):
            loss = ops.add(loss, ops.sum(ops.mul(value, float(c))))
        return loss

    return f


@pytest.mark.parametrize("seed", range(25))
def test_random_programs_under_every_order(seed):
    f = random_program(seed)
    x, y = normal(3, 4), normal(3, 4)
    grads = {}
    for order in ORDERS:
        check_grads(f, x, y, order=order, seed=seed)
        grads[order] = value_and_grad(f, argnums=(0, 1), order=order)(x, y)[1]
    for order in ORDERS:  # the order changes the summation order only
        for a, b in zip(grads[order], grads["heap"]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_a_borrowed_cotangent_is_never_written_in_place():
    # add's VJP hands one buffer g_A to both B and Q; Q (a reshape) passes a view of it
    # on to P. P then receives a second contribution from C. Were the view treated as
    # owned, it would be summed into in place, corrupting the g_A that B has not used
    # yet. Creation order (B, P, C, Q, A) makes the heap run Q and C before B.
    w = normal(3, 4)

    def f(x):
        b = ops.mul(x, 2.0)
        p = ops.mul(x, 3.0)
        c = ops.sin(p)
        a = ops.add(ops.reshape(p, (3, 4)), b)
        return ops.add(ops.sum(ops.mul(a, w)), ops.sum(c))

    x = normal(3, 4)
    expected = 2 * w + 3 * w + 3 * np.cos(3 * x)
    for order in ORDERS:
        np.testing.assert_allclose(value_and_grad(f, order=order)(x)[1], expected, rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in CASES if "conv2d" in n or "matmul" in n or "chain" in n])
def test_gradients_slab_by_slab(name, monkeypatch):
    # The test cases are small enough for one slab; a conv at paper size walks its rows
    # in several (prims.conv._row_slabs), a shared weight's gradient adds each
    # contribution in several (prims.linalg.add_matmul). Force those paths with a tiny
    # minimum slab (prims.common.slab_count reads it for both).
    from harness.engine.prims import common

    monkeypatch.setattr(common, "MIN_SLAB_BYTES", 1)
    fn, args = CASES[name]
    check_grads(functools.partial(fn, ops), *args)
    np.testing.assert_allclose(fn(ops, *args), fn(NUMPY, *args), rtol=1e-12, atol=1e-12)
