"""The HIPS autograd adapter, beyond the shared contract (tests/frameworks/
test_adapters.py checks every op's value, gradient and float32 there): the ops built
from autograd's primitives and the dtype-fixed primitives, against NumPy and finite
differences on their own; the upstream bug those work around; value_and_grad and
split_vjp against a hand-derived gradient."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from harness import frameworks, ops as contract
from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable

pytest.importorskip("autograd")

# ---- the adapter -----------------------------------------------------------------


@pytest.fixture(scope="module")
def adapter():
    return frameworks.get("autograd").load("cpu", "eager")


def test_implements_every_op(adapter):
    assert contract.missing_ops(adapter.ops) == []


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


def np_conv2d(x, w, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwpq,ocpq->nohw", windows, w)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_im2col_conv2d_on_a_rectangular_kernel_with_stride_and_padding(adapter, dtype):
    # Shapes the contract's cases do not reach: kh != kw, padding 2, stride 2 over an
    # odd size. The weight gradient of sum(conv * W) is the correlation of the input
    # with W (checked in float64 against NumPy's einsum of the windows).
    from autograd import grad

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9)).astype(dtype)
    w = rng.standard_normal((4, 3, 2, 3)).astype(dtype)
    out = adapter.ops.conv2d(x, w, stride=2, padding=2)
    want = np_conv2d(x.astype("float64"), w.astype("float64"), stride=2, padding=2)
    assert out.dtype == np.dtype(dtype) and out.shape == want.shape == (2, 4, 5, 6)
    np.testing.assert_allclose(out, want, rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-5)

    weights = rng.standard_normal(want.shape)
    grad_w = grad(lambda w: adapter.ops.sum(adapter.ops.mul(adapter.ops.conv2d(x, w, 2, 2), weights.astype(dtype))))(w)
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (2, 2), (2, 2)))
    windows = sliding_window_view(xp, (2, 3), axis=(2, 3))[:, :, ::2, ::2]
    assert grad_w.dtype == np.dtype(dtype)
    np.testing.assert_allclose(grad_w, np.einsum("nchwpq,nohw->ocpq", windows, weights), rtol=1e-4, atol=1e-4)


def test_max_pool2d_shares_the_gradient_of_a_tied_window(adapter):
    # autograd's max VJP (kept by the dtype-fixed primitive) splits the gradient
    # equally among tied maxima; torch gives it to one, PyTensor to each. Gradients
    # agree between frameworks only where windows have no ties.
    from autograd import grad

    x = np.array([[[[1.0, 1.0], [0.0, 1.0]]]], dtype=np.float32)
    g = grad(lambda x: adapter.ops.sum(adapter.ops.max_pool2d(x)))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [[[[1 / 3, 1 / 3], [0, 1 / 3]]]], rtol=1e-6)


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
