"""The public surface other code relies on: value_and_grad, vjp, grad, Ledger, ops."""

import numpy as np
import pytest

from harness.engine import ORDERS, Ledger, grad, ops, value_and_grad, vjp
from harness.engine import xp
from harness.engine.tape import Var

rng = np.random.default_rng(3)
x, W = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))


def loss(x, W):
    return ops.sum(ops.tanh(ops.matmul(x, W)))


def expected_grads(x, W):
    d = 1 - np.tanh(x @ W) ** 2
    return d @ W.T, x.T @ d


def test_argnums_int_gives_one_gradient_and_a_tuple_gives_a_tuple():
    value, gx = value_and_grad(loss)(x, W)
    np.testing.assert_allclose(value, np.tanh(x @ W).sum())
    np.testing.assert_allclose(gx, expected_grads(x, W)[0])
    _, (gW,) = value_and_grad(loss, argnums=(1,))(x, W)
    np.testing.assert_allclose(gW, expected_grads(x, W)[1])
    _, grads = value_and_grad(loss, argnums=(1, 0))(x, W)
    np.testing.assert_allclose(grads[0], expected_grads(x, W)[1])
    np.testing.assert_allclose(grads[1], expected_grads(x, W)[0])
    _, gW = value_and_grad(loss, argnums=-1)(x, W)
    np.testing.assert_allclose(gW, expected_grads(x, W)[1])


def test_a_dict_argument_gets_a_dict_gradient_and_other_arguments_pass_through():
    params = {"W": W, "b": np.zeros(2)}
    inputs = {"x": x, "labels": np.array([0, 1, 1, 0])}

    def model(params, inputs):
        logits = ops.add(ops.matmul(inputs["x"], params["W"]), params["b"])
        picked = ops.take(ops.logsumexp(logits, axis=-1, keepdims=True), inputs["labels"] * 0)
        return ops.mean(picked)

    value, grads = value_and_grad(model)(params, inputs)
    assert set(grads) == {"W", "b"}
    assert value.shape == () and isinstance(value, np.ndarray)


@pytest.mark.parametrize("order", ORDERS)
def test_vjp_splits_forward_and_backward(order):
    ledger = Ledger()
    value, backward = vjp(loss, x, W, argnums=(0, 1), order=order, ledger=ledger)
    forward_peak = ledger.peak_bytes
    ledger.reset_peak()
    gx, gW = backward()
    np.testing.assert_allclose(value, np.tanh(x @ W).sum())
    np.testing.assert_allclose(gW, expected_grads(x, W)[1])
    assert forward_peak > 0 and ledger.peak_bytes > 0
    assert [t for _, _, t in ledger.timeline if t in ("forward", "backward", "done")] == ["forward", "backward", "done"]


def test_vjp_of_a_non_scalar_output_takes_a_cotangent():
    value, backward = vjp(lambda x: ops.tanh(x), x)
    u = rng.standard_normal(value.shape)
    np.testing.assert_allclose(backward(u), u * (1 - np.tanh(x) ** 2))


def test_grad_returns_only_the_gradients():
    np.testing.assert_allclose(grad(loss, argnums=1)(x, W), expected_grads(x, W)[1])


def test_gradients_are_independent_writable_arrays():
    # sum's VJP is a read-only broadcast view, and add hands it to both operands: the
    # caller still gets two separate, writable arrays.
    gx, gy = value_and_grad(lambda x, y: ops.sum(ops.add(x, y)), argnums=(0, 1))(x, x.copy())[1]
    assert gx.flags.writeable and gy.flags.writeable
    assert not np.shares_memory(gx, gy)
    gx += 1
    np.testing.assert_array_equal(gy, 1)


def test_constant_output_and_identity():
    _, g = value_and_grad(lambda x: 3.0)(x)
    np.testing.assert_array_equal(g, np.zeros_like(x))
    value, g = value_and_grad(lambda x: x)(np.array(2.0))
    assert value == 2.0 and g == 1.0


def test_ops_outside_a_trace_compute_plain_arrays():
    out = ops.softmax(x)
    assert type(out) is np.ndarray
    np.testing.assert_allclose(out.sum(axis=-1), 1)
    assert type(ops.sum(x)) is np.ndarray  # 0-d array, not a NumPy scalar


def test_traced_values_support_arithmetic_operators_and_comparisons():
    def f(x):
        assert isinstance(x, Var) and x.shape == (4, 3) and x.dtype == np.float64
        y = (2.0 * x - 1.0) / 3.0 + x * x
        return ops.sum(ops.where(x > 0, -y, y @ np.ones((3, 1)) * 0.5))

    check = lambda x: np.where(x > 0, -((2 * x - 1) / 3 + x * x), ((2 * x - 1) / 3 + x * x) @ np.ones((3, 1)) * 0.5).sum()
    value, g = value_and_grad(f)(x)
    np.testing.assert_allclose(value, check(x))


def test_ledger_timeline_and_peak():
    ledger = Ledger()
    value_and_grad(loss, ledger=ledger)(x, W)
    indices = [i for i, _, _ in ledger.timeline]
    assert indices == list(range(len(indices)))
    assert ledger.peak_bytes == max(live for _, live, _ in ledger.timeline)
    assert ledger.vjp_calls == {"sum": 1, "tanh": 1, "matmul": 1}


def test_array_module_is_numpy_without_cupy_arrays():
    assert xp.array_module(x, 2.0) is np
    assert not xp.is_cupy(x)
    view = x.T[1:]
    assert xp.owner(view) is x and xp.buffer_address(view) == xp.buffer_address(x)


def test_runs_on_cupy_when_there_is_a_gpu():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # pragma: no cover - depends on the machine
        pytest.skip(f"no CUDA device: {error}")
    ledger = Ledger()
    value, (gx, gW) = value_and_grad(loss, argnums=(0, 1), ledger=ledger)(cupy.asarray(x), cupy.asarray(W))
    assert type(gx) is cupy.ndarray
    np.testing.assert_allclose(cupy.asnumpy(gW), expected_grads(x, W)[1], rtol=1e-6)
    assert ledger.peak_bytes > 0
