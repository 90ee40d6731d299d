"""The PyTensor adapter, beyond the shared contract (tests/frameworks/test_adapters.py
checks every op's value, gradient and float32 in both modes): value_and_grad and
split_vjp against hand-derived gradients, what the split's forward keeps, the eager
mode's rewrite, stability without FAST_RUN's rewrites, the compile cache's location.

Compile cost: "compiled" compiles C code, once per new op signature and dtype, into
the cache (seconds each on an empty cache); "eager" compiles none.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from harness import frameworks, ops as contract
from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable
from harness.workloads import build

# Not importorskip: load() must be the first to import PyTensor, so that it uses the
# gradmem compile cache (harness/frameworks/pytensor.py).
if not frameworks.get("pytensor").available()[0]:
    pytest.skip("pytensor is not installed", allow_module_level=True)

# ---- the adapter, in both modes ---------------------------------------------------

MODES = ("eager", "compiled")


@pytest.fixture(scope="module", params=MODES)
def adapter(request):
    return frameworks.get("pytensor").load("cpu", request.param), request.param


def test_implements_every_op():
    assert contract.missing_ops(frameworks.get("pytensor").load("cpu", "eager").ops) == []


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


def test_value_and_grad_matches_hand_derived_gradient(adapter):
    # float64 only: every new (op, dtype) costs a C compile on an empty cache;
    # float32 through value_and_grad is covered by the chained_dot test below.
    dtype = "float64"
    pt_adapter, mode = adapter
    params, inputs, loss, grad_w = mlp_problem(dtype)
    got_loss, grads = pt_adapter.value_and_grad(mlp_loss, mode)(params, inputs)
    assert pt_adapter.last_compile_s > 0
    tol = 1e-12
    assert np.asarray(got_loss).dtype == np.dtype(dtype)
    assert grads["W"].dtype == np.dtype(dtype)
    np.testing.assert_allclose(got_loss, loss, rtol=tol)
    np.testing.assert_allclose(grads["W"], grad_w, rtol=tol, atol=tol)


def test_a_compiled_step_is_one_function():
    # FAST_RUN plans the whole step as PyTensor users write it: no forward/backward cut
    assert frameworks.get("pytensor").load("cpu", "compiled").split_vjp(mlp_loss, "compiled") is None


def split_of(adapter, loss):
    pt_adapter, mode = adapter
    if mode == "compiled":
        pytest.skip("compiled cells run one function for loss and gradients: no split")
    return pt_adapter.split_vjp(loss, mode)


def test_split_vjp_agrees_with_value_and_grad(adapter):
    pt_adapter, mode = adapter
    forward, backward = split_of(adapter, mlp_loss)
    params, inputs, _, _ = mlp_problem("float64")
    loss, grads = pt_adapter.value_and_grad(mlp_loss, mode)(params, inputs)
    state = forward(params, inputs)
    np.testing.assert_allclose(pt_adapter.loss_of(state), loss, rtol=1e-14)
    np.testing.assert_allclose(backward(state)["W"], grads["W"], rtol=1e-14)


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


def test_split_forward_keeps_exactly_what_the_chain_rule_needs(adapter):
    # x's gradient needs z_1 .. z_{L-1} (the right factors of the L products); z_L
    # feeds only the sum, whose gradient needs its shape alone. So the forward state
    # must hold L-1 D x D arrays: no more (shape-only uses do not count), no less.
    pt_adapter, mode = adapter
    problem = build("chained_dot", "tiny", "float64")
    D, L = 32, 5
    forward, backward = split_of(adapter, problem.loss)
    state = forward(problem.params, problem.inputs)
    residuals = state[1]
    assert sum(r.nbytes for r in residuals) == (L - 1) * D * D * 8
    want = chained_dot_gradient(problem.params["x"], problem.inputs["z"], L)
    np.testing.assert_allclose(backward(state)["x"], want, rtol=1e-12)


# ---- eager: FAST_COMPILE's Python VM, NumPy kernels -----------------------------------


def fan_out_loss(ops, params, inputs):
    # w is used 40 times: pytensor.grad sums its 40 contributions in one 40-input Add,
    # which FAST_COMPILE's Python Elemwise cannot run (NumPy ufuncs take <= 32 operands)
    return ops.sum(ops.stack([ops.mul(params["w"], float(k)) for k in range(1, 41)]))


def test_eager_runs_a_40_way_fan_out_as_numpy_calls():
    from pytensor.tensor.elemwise import Elemwise

    pt_adapter = frameworks.get("pytensor").load("cpu", "eager")
    w = np.ones((3, 4), np.float32)
    loss, grads = pt_adapter.value_and_grad(fan_out_loss, "eager")({"w": w}, {})
    assert grads["w"].dtype == np.float32
    np.testing.assert_allclose(grads["w"], np.full((3, 4), sum(range(1, 41))), rtol=1e-6)
    np.testing.assert_allclose(loss, 12 * sum(range(1, 41)), rtol=1e-6)
    # every Elemwise left has a NumPy ufunc for its arity (no element-by-element loop)
    fn = pt_adapter.last_function
    for node in fn.maker.fgraph.apply_nodes:
        if isinstance(node.op, Elemwise):
            assert node.op.nfunc_spec and node.op.nfunc_spec[1] == len(node.inputs), node


def test_logsumexp_is_stable_in_eager_mode():
    # pt.logsumexp is log(sum(exp(x))), stabilised only by FAST_RUN's rewrites: at
    # x ~ 1000, exp overflows. The adapter shifts by the max, so both modes agree.
    x = np.array([[1000.0, 1001.0, 999.0]])
    want_lse = 1001.0 + np.log(np.exp(-1.0) + 1.0 + np.exp(-2.0))
    for mode in ("eager", "compiled"):
        pt_adapter = frameworks.get("pytensor").load("cpu", mode)
        loss, grads = pt_adapter.value_and_grad(lambda ops, p, i: ops.sum(ops.logsumexp(p["x"])), mode)({"x": x}, {})
        np.testing.assert_allclose(loss, want_lse, rtol=1e-14)
        # d logsumexp / dx = softmax(x)
        np.testing.assert_allclose(grads["x"], np.exp(x - want_lse), rtol=1e-12)


# ---- configuration and bad input ---------------------------------------------------


def test_load_points_pytensor_at_gradmem_compile_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTENSOR_FLAGS"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    code = (
        "from harness.frameworks import get; get('pytensor').load('cpu', 'eager');"
        "import pytensor; print(pytensor.config.base_compiledir)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / "gradmem" / "pytensor")


def test_cuda_is_unavailable_with_its_reason():
    with pytest.raises(Unavailable, match="CUDA"):
        frameworks.get("pytensor").load("cuda", "compiled")
    assert frameworks.get("pytensor").devices() == ["cpu"]


def test_unknown_mode_device_and_linker_list_the_choices():
    from harness.frameworks.pytensor import PytensorAdapter

    with pytest.raises(ChoiceError, match="valid pytensor modes: eager, compiled"):
        frameworks.get("pytensor").load("cpu", "jit")
    with pytest.raises(ChoiceError, match="valid pytensor devices: cpu, cuda"):
        frameworks.get("pytensor").load("tpu", "eager")
    with pytest.raises(ChoiceError, match="valid pytensor linkers: cvm, numba"):
        PytensorAdapter(linker="c")
