"""The HIPS autograd adapter: every op against NumPy, its gradients against central
finite differences, float32 kept, value_and_grad and split_vjp against a hand-derived
gradient."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import logsumexp as np_logsumexp

from harness import frameworks, ops as contract
from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable
from harness.workloads import build

pytest.importorskip("autograd")

# ---- the op set in plain NumPy: the semantics harness/ops.py states ---------------


def np_conv2d(x, w, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwpq,ocpq->nohw", windows, w)


def np_max_pool2d(x, size=2):
    return sliding_window_view(x, (size, size), axis=(2, 3))[:, :, ::size, ::size].max(axis=(-2, -1))


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


NUMPY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "sin": np.sin, "cos": np.cos, "matmul": np.matmul,
    "sum": np.sum, "mean": np.mean, "max": np.max,
    "reshape": np.reshape, "permute_dims": np.transpose,
    "concat": np.concatenate, "stack": np.stack,
    "getitem": lambda x, key: x[key], "take": np.take, "where": np.where,
    "softmax": np_softmax,
    "logsumexp": lambda x, axis=-1, keepdims=False: np_logsumexp(x, axis=axis, keepdims=keepdims),
    "conv2d": np_conv2d, "max_pool2d": np_max_pool2d,
    "upsample2d": lambda x, scale=2: x.repeat(scale, axis=2).repeat(scale, axis=3),
    "cumsum": np.cumsum,
}  # fmt: skip

_rng = np.random.default_rng(7)
MASK = _rng.random((3, 4)) > 0.5
INDEX = np.array([2, 0, 2, 1])

# id -> (op, shapes of the differentiated arrays, call(op_fn, *arrays)). The arrays are
# kept away from 0 (relu's kink, log, sqrt, 1/x) so finite differences are smooth.
CASES = {
    "add": ("add", [(3, 4), (4,)], None),
    "add_scalar_left": ("add", [(3, 4)], lambda f, x: f(2.0, x)),
    "sub": ("sub", [(3, 4), (3, 1)], None),
    "sub_scalar_left": ("sub", [(3, 4)], lambda f, x: f(1.5, x)),
    "mul": ("mul", [(3, 4), (3, 4)], None),
    "mul_scalar": ("mul", [(3, 4)], lambda f, x: f(x, 0.1)),
    "div": ("div", [(3, 4), (4,)], None),
    "div_scalar_left": ("div", [(3, 4)], lambda f, x: f(3.0, x)),
    "neg": ("neg", [(3, 4)], None),
    "exp": ("exp", [(3, 4)], None),
    "log": ("log", [(3, 4)], lambda f, x: f(x * x)),
    "sqrt": ("sqrt", [(3, 4)], lambda f, x: f(x * x)),
    "tanh": ("tanh", [(3, 4)], None),
    "sigmoid": ("sigmoid", [(3, 4)], None),
    "relu": ("relu", [(3, 4)], None),
    "sin": ("sin", [(3, 4)], None),
    "cos": ("cos", [(3, 4)], None),
    "matmul": ("matmul", [(3, 4), (4, 2)], None),
    "matmul_batched": ("matmul", [(2, 3, 4), (2, 4, 5)], None),
    "sum_all": ("sum", [(3, 4)], None),
    "sum_axis_keepdims": ("sum", [(2, 3, 4)], lambda f, x: f(x, axis=(0, 2), keepdims=True)),
    "mean_axis": ("mean", [(2, 3, 4)], lambda f, x: f(x, axis=1)),
    "mean_all": ("mean", [(3, 4)], None),
    "max_axis": ("max", [(3, 4)], lambda f, x: f(x, axis=1)),
    "max_keepdims": ("max", [(2, 3, 4)], lambda f, x: f(x, axis=-1, keepdims=True)),
    "reshape": ("reshape", [(3, 4)], lambda f, x: f(x, (2, -1))),
    "permute_dims": ("permute_dims", [(2, 3, 4)], lambda f, x: f(x, (2, 0, 1))),
    "concat": ("concat", [(3, 4), (3, 2)], lambda f, a, b: f([a, b], axis=1)),
    "stack": ("stack", [(3, 4), (3, 4)], lambda f, a, b: f([a, b], axis=1)),
    "getitem": ("getitem", [(3, 4)], lambda f, x: f(x, (slice(None), None, slice(1, 3)))),
    "getitem_int": ("getitem", [(3, 4)], lambda f, x: f(x, 1)),
    "take_axis0": ("take", [(3, 4)], lambda f, x: f(x, INDEX, axis=0)),
    "take_axis1": ("take", [(3, 4)], lambda f, x: f(x, INDEX, axis=1)),
    "where": ("where", [(3, 4), (3, 4)], lambda f, a, b: f(MASK, a, b)),
    "where_broadcast": ("where", [(3, 4), (4,)], lambda f, a, b: f(MASK, a, b)),
    "softmax": ("softmax", [(3, 4)], None),
    "softmax_axis0": ("softmax", [(3, 4)], lambda f, x: f(x, axis=0)),
    "logsumexp": ("logsumexp", [(3, 4)], None),
    "logsumexp_keepdims": ("logsumexp", [(3, 4)], lambda f, x: f(x, axis=0, keepdims=True)),
    "conv2d": ("conv2d", [(2, 3, 6, 6), (4, 3, 3, 3)], None),
    "conv2d_stride_pad": ("conv2d", [(2, 3, 6, 5), (2, 3, 3, 3)], lambda f, x, w: f(x, w, stride=2, padding=1)),
    "conv2d_1x1": ("conv2d", [(1, 3, 4, 4), (2, 3, 1, 1)], None),
    "max_pool2d": ("max_pool2d", [(2, 2, 4, 6)], None),
    "max_pool2d_ragged": ("max_pool2d", [(1, 2, 5, 7)], None),
    "upsample2d": ("upsample2d", [(2, 2, 3, 2)], None),
    "upsample2d_3": ("upsample2d", [(1, 2, 2, 3)], lambda f, x: f(x, scale=3)),
    "cumsum": ("cumsum", [(3, 4)], lambda f, x: f(x, axis=1)),
}


def case_arrays(case_id, dtype):
    rng = np.random.default_rng(sum(map(ord, case_id)))
    arrays = []
    for shape in CASES[case_id][1]:
        x = rng.standard_normal(shape)
        arrays.append((np.sign(x) * (np.abs(x) + 0.2)).astype(dtype))
    return arrays


def call_case(case_id, fn, arrays):
    call = CASES[case_id][2] or (lambda f, *xs: f(*xs))
    return call(fn, *arrays)


def numpy_value(case_id, arrays):
    return call_case(case_id, NUMPY[CASES[case_id][0]], arrays)


def test_the_numpy_table_covers_the_contract():
    assert sorted(NUMPY) == sorted(contract.OPS)
    assert {op for op, _, _ in CASES.values()} == set(contract.OPS)


# ---- the adapter -----------------------------------------------------------------


@pytest.fixture(scope="module")
def adapter():
    return frameworks.get("autograd").load("cpu", "eager")


def test_implements_every_op(adapter):
    assert contract.missing_ops(adapter.ops) == []


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_op_matches_numpy_and_keeps_dtype(adapter, case_id, dtype):
    arrays = case_arrays(case_id, dtype)
    got = np.asarray(call_case(case_id, getattr(adapter.ops, CASES[case_id][0]), arrays))
    want = numpy_value(case_id, arrays)
    assert got.dtype == np.dtype(dtype)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


def _weighted_sum(adapter, case_id):
    """loss(*arrays) = sum(op(...) * W) with a fixed W: its gradient is the op's VJP of W."""
    op = getattr(adapter.ops, CASES[case_id][0])

    def loss(*arrays):
        out = call_case(case_id, op, arrays)
        weights = np.random.default_rng(1).standard_normal(np.shape(out)).astype(arrays[0].dtype)
        return adapter.ops.sum(adapter.ops.mul(out, weights))

    return loss


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_op_gradient_matches_central_differences(adapter, case_id):
    from autograd import grad

    arrays = case_arrays(case_id, "float64")
    loss = _weighted_sum(adapter, case_id)
    for argnum, x in enumerate(arrays):
        got = grad(loss, argnum)(*arrays)
        want = np.zeros_like(x)
        h = 1e-6
        for i in np.ndindex(x.shape):
            up, down = [a.copy() for a in arrays], [a.copy() for a in arrays]
            up[argnum][i] += h
            down[argnum][i] -= h
            want[i] = (loss(*up) - loss(*down)) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"{case_id} arg {argnum}")


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_op_gradient_stays_float32(adapter, case_id):
    from autograd import grad

    arrays = case_arrays(case_id, "float32")
    loss = _weighted_sum(adapter, case_id)
    for argnum in range(len(arrays)):
        assert grad(loss, argnum)(*arrays).dtype == np.float32, f"{case_id} arg {argnum}"


def test_upstream_float64_upcast_that_the_adapter_works_around_is_still_there():
    # The adapter replaces autograd's max/where/mean VJPs because they return float64
    # for float32 input (HIPS/autograd#199). When this fails autograd has fixed it:
    # drop the workaround in harness/frameworks/autograd.py.
    import autograd.numpy as anp
    from autograd import grad

    x = np.ones((2, 3), np.float32)
    upcast = {
        "max": grad(lambda x: anp.sum(anp.max(x, axis=1)))(x).dtype,
        "where": grad(lambda x: anp.sum(anp.where(x > 0, x, 0.0)))(x).dtype,
        "mean": grad(lambda x: anp.mean(x))(x).dtype,
    }
    assert upcast == {"max": np.float64, "where": np.float64, "mean": np.float64}


# ---- value_and_grad and split_vjp ------------------------------------------------


def mlp_loss(ops, params, inputs):
    return ops.sum(ops.mul(ops.tanh(ops.matmul(params["W"], inputs["x"])), inputs["c"]))


def mlp_problem(dtype):
    rng = np.random.default_rng(3)
    params = {"W": rng.standard_normal((4, 3)).astype(dtype)}
    inputs = {"x": rng.standard_normal((3, 5)).astype(dtype), "c": rng.standard_normal((4, 5)).astype(dtype)}
    h = np.tanh(params["W"] @ inputs["x"])
    # d/dW sum(tanh(W x) * c) = ((1 - tanh^2) * c) x^T
    grad_w = ((1 - h * h) * inputs["c"]) @ inputs["x"].T
    return params, inputs, float(np.sum(h * inputs["c"])), grad_w


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_value_and_grad_matches_hand_derived_gradient(adapter, dtype):
    params, inputs, loss, grad_w = mlp_problem(dtype)
    got_loss, grads = adapter.value_and_grad(mlp_loss, "eager")(params, inputs)
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert np.asarray(got_loss).dtype == np.dtype(dtype)
    assert grads["W"].dtype == np.dtype(dtype)
    np.testing.assert_allclose(got_loss, loss, rtol=tol)
    np.testing.assert_allclose(grads["W"], grad_w, rtol=tol, atol=tol)


def test_split_vjp_agrees_with_value_and_grad(adapter):
    params, inputs, _, _ = mlp_problem("float64")
    loss, grads = adapter.value_and_grad(mlp_loss)(params, inputs)
    forward, backward = adapter.split_vjp(mlp_loss)
    state = forward(params, inputs)
    assert adapter.loss_of(state) == loss
    np.testing.assert_array_equal(backward(state)["W"], grads["W"])


def chained_dot_gradient(x, z, L):
    """d/dx sum(x^L z) = sum_k (x^T)^k 1 (x^(L-1-k) z)^T, by the chain rule."""
    zs = [z]
    for _ in range(L - 1):
        zs.append(x @ zs[-1])
    g, total = np.ones_like(z), np.zeros_like(x)
    for k in range(L):
        total += g @ zs[L - 1 - k].T
        g = x.T @ g
    return total


def test_chained_dot_tiny_matches_the_chain_rule(adapter):
    problem = build("chained_dot", "tiny", "float64")
    _, grads = adapter.value_and_grad(problem.loss)(problem.params, problem.inputs)
    want = chained_dot_gradient(problem.params["x"], problem.inputs["z"], 5)
    np.testing.assert_allclose(grads["x"], want, rtol=1e-12)


# ---- bad input -------------------------------------------------------------------


def test_cuda_is_unavailable_with_its_reason():
    with pytest.raises(Unavailable, match="CUDA"):
        frameworks.get("autograd").load("cuda", "eager")
    assert frameworks.get("autograd").devices() == ["cpu"]


def test_unknown_mode_and_device_list_the_choices():
    with pytest.raises(ChoiceError, match="valid autograd modes: eager"):
        frameworks.get("autograd").load("cpu", "compiled")
    with pytest.raises(ChoiceError, match="valid autograd devices: cpu, cuda"):
        frameworks.get("autograd").load("tpu", "eager")
