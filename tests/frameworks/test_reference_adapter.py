"""The reference-engine adapter, beyond the shared contract (tests/frameworks/
test_adapters.py checks every op there): the engine's options through the adapter
(order, ledger), what the ledger holds between the phases of chained_dot, the CuPy
probe's arithmetic (on a stand-in: no GPU here), and chained_dot tiny giving the same
gradient in the reference engine, autograd and PyTensor (both modes)."""

import types

import numpy as np
import pytest

from harness import frameworks, ops as contract
from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable
from harness.frameworks.reference import CupyPoolProbe
from harness.workloads import build


@pytest.fixture(scope="module")
def adapter():
    return frameworks.get("reference").load("cpu", "eager")


def test_implements_every_op(adapter):
    assert contract.missing_ops(adapter.ops) == []


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


@pytest.mark.parametrize("order", ["heap", "bfs", "dfs"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_value_and_grad_matches_hand_derived_gradient_in_every_order(dtype, order):
    params, inputs, loss, grad_w = mlp_problem(dtype)
    ref = frameworks.get("reference").load("cpu", "eager")
    got_loss, grads = ref.value_and_grad(mlp_loss, order=order)(params, inputs)
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert np.asarray(got_loss).dtype == grads["W"].dtype == np.dtype(dtype)
    np.testing.assert_allclose(got_loss, loss, rtol=tol)
    np.testing.assert_allclose(grads["W"], grad_w, rtol=tol, atol=tol)


def test_split_vjp_agrees_with_value_and_grad(adapter):
    params, inputs, _, _ = mlp_problem("float64")
    loss, grads = adapter.value_and_grad(mlp_loss)(params, inputs)
    forward, backward = adapter.split_vjp(mlp_loss)
    state = forward(params, inputs)
    assert adapter.loss_of(state) == loss
    np.testing.assert_array_equal(backward(state)["W"], grads["W"])


def test_ledger_holds_exactly_what_chained_dot_needs_between_the_phases(adapter):
    # z_{i+1} = x @ z_i: x's gradient needs z_1 .. z_{L-1} (z_0 is the caller's, not
    # the engine's); z_L feeds only the sum, whose VJP needs its shape. So between
    # forward and backward the engine holds L-1 D x D arrays and the scalar loss; after
    # backward, once the forward state (which holds the loss) is dropped, only the
    # gradient (D x D).
    problem = build("chained_dot", "tiny", "float64")
    D, L, item = 32, 5, 8
    forward, backward = adapter.split_vjp(problem.loss)
    with adapter.saving():  # as the breakdown's step: the ledger counts there
        state = forward(problem.params, problem.inputs)
    ledger = adapter.last_ledger
    assert ledger.live_bytes == (L - 1) * D * D * item + item
    # during the forward pass z_L was live too, before the sum consumed it
    assert ledger.peak_bytes == L * D * D * item + item
    grads = backward(state)
    del state
    assert ledger.live_bytes == D * D * item
    assert set(ledger.allocated) == {"float64"}
    np.testing.assert_allclose(grads["x"], chained_dot_gradient(problem.params["x"], problem.inputs["z"], L), rtol=1e-12)


def test_ledger_options():
    from harness.engine import Ledger

    params, inputs, _, _ = mlp_problem("float32")
    ref = frameworks.get("reference").load("cpu", "eager")
    mine = Ledger()
    ref.value_and_grad(mlp_loss, ledger=mine)(params, inputs)
    assert ref.last_ledger is mine and mine.peak_bytes > 0 and set(mine.allocated) == {"float32"}
    quiet = frameworks.get("reference")
    quiet.__init__(track_memory=False)
    with quiet.saving():
        quiet.load("cpu", "eager").value_and_grad(mlp_loss)(params, inputs)
    assert quiet.last_ledger is None
    # By default the measured steps run without the ledger (as torch's without its
    # saved-tensor hooks): only the steps under saving() count; "always": every step.
    plain = frameworks.get("reference").load("cpu", "eager")
    plain.value_and_grad(mlp_loss)(params, inputs)
    assert plain.last_ledger is None
    with plain.saving():
        plain.value_and_grad(mlp_loss)(params, inputs)
    assert plain.last_ledger is not None and plain.last_ledger.peak_bytes > 0
    always = frameworks.get("reference")
    always.__init__(track_memory="always")
    always.load("cpu", "eager").value_and_grad(mlp_loss)(params, inputs)
    assert always.last_ledger is not None
    with pytest.raises(ValueError, match="always"):
        always.__init__(track_memory="sometimes")
    assert ref.settings()["reference.order"] == "heap" and ref.settings()["threads"] >= 1


def test_settings_name_the_blas_kernels_numpy_runs():
    # OpenBLAS picks its kernels from the CPU, or from $OPENBLAS_CORETYPE where that is
    # set (before NumPy loads: the worker's environment); the record says which ran.
    import ctypes
    import glob
    import os

    import numpy

    libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "lib*openblas*.so*"))
    if not libs or not hasattr(ctypes.CDLL(libs[0]), "scipy_openblas_get_corename64_"):
        pytest.skip("NumPy without its bundled scipy-openblas")
    lib = ctypes.CDLL(libs[0])
    lib.scipy_openblas_get_corename64_.restype = ctypes.c_char_p
    ref = frameworks.get("reference").load("cpu", "eager")
    assert ref.settings()["numpy.blas_core"] == lib.scipy_openblas_get_corename64_().decode() != ""


def test_unknown_order_mode_and_device_list_the_choices():
    from harness.frameworks.reference import ReferenceAdapter

    with pytest.raises(ChoiceError, match="valid reference orders: heap, bfs, dfs"):
        ReferenceAdapter(order="random")
    with pytest.raises(ChoiceError, match="valid reference modes: eager"):
        frameworks.get("reference").load("cpu", "compiled")
    with pytest.raises(ChoiceError, match="valid reference devices: cpu, cuda"):
        frameworks.get("reference").load("tpu", "eager")


# ---- CUDA ----------------------------------------------------------------------------


def test_cuda_without_cupy_is_unavailable_and_says_why():
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    with pytest.raises(Unavailable, match="CuPy is not installed"):
        frameworks.get("reference").load("cuda", "eager")
    assert frameworks.get("reference").devices() == ["cpu"]


def fake_cupy():
    """Just what CupyPoolProbe touches: a pool, a stream, and MemoryHook's protocol."""

    class MemoryHook:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    pool = types.SimpleNamespace(used=0, total=0)
    pool.used_bytes = lambda: pool.used
    pool.total_bytes = lambda: pool.total
    stream = types.SimpleNamespace(synchronize=lambda: None)
    cuda = types.SimpleNamespace(MemoryHook=MemoryHook, get_current_stream=lambda: stream)
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool), pool


def test_cupy_probe_peak_is_the_baseline_plus_the_largest_net_growth():
    cupy, pool = fake_cupy()
    probe = CupyPoolProbe(cupy)
    hook = probe.hook

    def malloc(n):  # what CuPy's pool does: hand out a block, then call the hook
        pool.used += n
        hook.malloc_postprocess(device_id=0, size=n, mem_size=n, mem_ptr=0, pmem_id=0)

    def free(n):
        pool.used -= n
        hook.free_postprocess(device_id=0, mem_size=n, mem_ptr=0, pmem_id=0)

    malloc(1024)  # before the reset: part of the baseline, not of the peak's growth
    probe.reset()
    malloc(512), malloc(2048), free(512), malloc(1024), free(2048)
    assert probe.current_bytes() == 1024 + 1024
    # live after each event: 1536, 3584, 3072, 4096, 2048: the peak is 4096
    assert probe.peak_bytes() == 4096
    probe.reset()
    free(1024)
    assert probe.peak_bytes() == probe.current_bytes() + 1024 == 2048


# ---- the same gradient everywhere ------------------------------------------------------


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


def test_chained_dot_tiny_gradient_agrees_in_reference_autograd_and_pytensor(adapter):
    problem = build("chained_dot", "tiny", "float64")
    _, ref = adapter.value_and_grad(problem.loss)(problem.params, problem.inputs)
    ref = ref["x"]
    assert np.allclose(ref, chained_dot_gradient(problem.params["x"], problem.inputs["z"], 5), rtol=1e-12)
    for name in ("autograd", "pytensor"):
        other = frameworks.get(name)
        if not other.available()[0]:
            continue
        for mode in other.modes:
            other.load("cpu", mode)
            _, grads = other.value_and_grad(problem.loss, mode)(problem.params, problem.inputs)
            rel = np.linalg.norm(grads["x"] - ref) / np.linalg.norm(ref)
            assert rel <= 1e-10, f"{name} {mode}: relative error {rel:.1e}"


# ---- remat plans through the adapter ------------------------------------------------------
@pytest.mark.parametrize("remat", ["native", "sqrt", "revolve:2", "articulation"])
@pytest.mark.parametrize("workload", ["chained_dot", "rnn_fanout", "tiny_nerf"])
def test_every_remat_plan_gives_the_plain_gradient_and_is_recorded(workload, remat):
    problem = build(workload, "tiny", "float64")
    plain = frameworks.get("reference").load("cpu", "eager")
    want = plain.value_and_grad(problem.loss)(problem.params, problem.inputs)[1]
    adapter = frameworks.get("reference").load("cpu", "eager", remat)
    adapter.prepare(problem.loss, problem.params, problem.inputs, name=f"{workload} at tiny")
    got = adapter.value_and_grad(problem.loss)(problem.params, problem.inputs)[1]
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)
    assert adapter.settings()["reference.remat"] == remat
    # split_vjp follows the plan too (the measured phases use it)
    forward, backward = adapter.split_vjp(problem.loss)
    split = backward(forward(problem.params, problem.inputs))
    for key in want:
        np.testing.assert_allclose(split[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


def test_revolve_is_offered_for_every_snapshot_count_and_a_malformed_one_is_refused():
    adapter = frameworks.get("reference")
    assert adapter.load("cpu", "eager", "revolve:7").plan.arg == 7
    with pytest.raises(ChoiceError, match="revolve:S"):
        adapter.load("cpu", "eager", "revolve:x")
