"""What is particular to the MLX, tinygrad and PaddlePaddle rows (the shared contract
runs in test_adapters.py, their remat in test_adapter_remat.py, their gradients
against the reference engine in tests/test_check.py).
"""

import importlib.util

import numpy as np
import pytest

from harness import frameworks, workloads
from harness.frameworks.base import Unavailable
from harness.sweep import cells
from own_process import OWN_PROCESS, in_this_process


def _needs(name):
    if not in_this_process(name):
        pytest.skip(OWN_PROCESS[name])
    adapter = frameworks.get(name)
    ok, reason = adapter.available()
    if not ok:
        pytest.skip(f"{name} unavailable: {reason}")
    return adapter


# ---- MLX -----------------------------------------------------------------------------
def test_mlx_float64_is_unavailable_with_its_reason_not_silently_float32():
    adapter = frameworks.get("mlx")
    assert adapter.dtypes == ("float32",)
    cell = {"dtype": "float64", "mode": "eager", "device": "cpu", "remat": "none"}
    if adapter.available()[0]:
        reason = cells.unavailable_reason(cell, adapter)
        assert "float64" in reason and "Convolution" in reason
        loaded = adapter.load("cpu", "eager")
        with pytest.raises(Unavailable, match="float64"):
            loaded.from_numpy({"x": np.ones(3)})


def test_mlx_float32_sum_is_still_naive():
    # The adapter calls mx.sum, as MLX users do, and the check's float32 tolerance is
    # not widened for it (mlx.py). This keeps the upstream behaviour in sight: a sum of
    # 2^20 float32 values adds one at a time (error ~ n * eps / 2 worst case), where
    # NumPy's pairwise float32 sum stays near eps * log2(n). When MLX fixes it, this
    # fails and the note in mlx.py and docs/frameworks.md go.
    _needs("mlx")
    import mlx.core as mx

    x = np.random.default_rng(0).uniform(0.7, 0.76, 2**20).astype(np.float32)
    exact = x.astype(np.float64).sum()
    mlx_error = abs(float(mx.sum(mx.array(x))) / exact - 1)
    numpy_error = abs(float(x.sum()) / exact - 1)
    assert numpy_error < 1e-6
    assert mlx_error > 100 * max(numpy_error, 1e-7), (mlx_error, numpy_error)


def test_mlx_step_evaluates_loss_and_gradients_in_one_eval(monkeypatch):
    # The step is what MLX users write: value_and_grad, then one mx.eval of the loss
    # and every gradient, inside the step (so the phase holds the computation).
    adapter = _needs("mlx").load("cpu", "eager")
    import mlx.core as mx

    problem = workloads.build("rnn_fanout", "tiny", "float32")
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
    step = adapter.value_and_grad(problem.loss)
    calls, original = [], mx.eval
    monkeypatch.setattr(mx, "eval", lambda *args: calls.append(args) or original(*args))
    loss, grads = step(params, inputs)
    assert len(calls) == 1
    evaluated_loss, evaluated_grads = calls[0]
    assert evaluated_loss is loss and evaluated_grads is grads and set(grads) == set(problem.params)


# ---- tinygrad --------------------------------------------------------------------------
def test_tinygrad_without_clang_is_unavailable_naming_the_binary(monkeypatch):
    if importlib.util.find_spec("tinygrad") is None:
        pytest.skip("tinygrad is not installed")
    monkeypatch.setenv("CC", "gradmem-no-such-clang")
    adapter = frameworks.get("tinygrad")
    ok, reason = adapter.available()
    assert not ok and "gradmem-no-such-clang" in reason and "apt-get install clang" in reason
    with pytest.raises(Unavailable, match="gradmem-no-such-clang"):
        adapter.load("cpu", "eager")


def test_tinygrad_scalar_params_of_equal_value_get_their_own_gradients():
    # A 0-d Tensor made from NumPy is a CONST node, and equal nodes are one node in
    # tinygrad: two scalar params with one value got the sum of both gradients before
    # from_numpy made them buffers. d/da (2a + 3b) = 2, d/db = 3.
    adapter = _needs("tinygrad").load("cpu", "eager")
    params = adapter.from_numpy({"a": np.array(1.5, np.float32), "b": np.array(1.5, np.float32)})
    loss_fn = lambda ops, p, i: ops.add(ops.mul(p["a"], 2.0), ops.mul(p["b"], 3.0))  # noqa: E731
    _, grads = adapter.value_and_grad(loss_fn)(params, {})
    assert {k: float(v) for k, v in adapter.to_numpy(grads).items()} == {"a": 2.0, "b": 3.0}


def test_tinygrad_realizes_loss_and_every_gradient_in_one_schedule(monkeypatch):
    # One Tensor.realize for the loss and all gradients: the forward they share is
    # scheduled once. Counted by wrapping tinygrad's scheduler entry point.
    adapter = _needs("tinygrad").load("cpu", "eager")
    from tinygrad import Tensor

    calls = []
    original = Tensor.realize
    monkeypatch.setattr(Tensor, "realize", lambda *ts, **kw: calls.append(len(ts)) or original(*ts, **kw))
    problem = workloads.build("rnn_fanout", "tiny", "float32")
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
    calls.clear()
    _, grads = adapter.value_and_grad(problem.loss)(params, inputs)
    assert calls == [1 + len(problem.params)], calls
    assert all(g.uop.is_realized for g in grads.values())


def test_tinygrad_older_releases_jit_buffers_are_the_captured_kernels_less_their_inputs():
    # 0.10.x-0.12 keep a TinyJit's kernels as ExecItems (CapturedJit.jit_cache); the
    # input slots (input_replace) are not the JIT's own; each base buffer counts once.
    from harness.frameworks.tinygrad import _jit_cache_buffers

    class Buf:
        def __init__(self, nbytes, base=None, allocated=True):
            self.nbytes, self._base, self.allocated = nbytes, base, allocated

        @property
        def base(self):
            return self._base or self

        def is_allocated(self):
            return self.allocated

    out, mid, whole, param, freed = Buf(8), Buf(16), Buf(32), Buf(64), Buf(128, allocated=False)
    view = Buf(4, base=whole)
    item = lambda *bufs: type("ExecItem", (), {"bufs": list(bufs)})()  # noqa: E731
    captured = type("CapturedJit", (), {
        "jit_cache": [item(mid, param, None), item(out, mid, view), item(whole, freed)],
        "input_replace": {(0, 1): 0},
    })()
    assert sorted(b.nbytes for b in _jit_cache_buffers(captured)) == [8, 16, 32]


def test_tinygrad_compat_fallbacks_leave_the_installed_release_as_it_was():
    # The newest release (the adapter's first branch everywhere): its own knobs, its
    # allocator untouched, its buffers MAP_SHARED (shmem pages)
    adapter = _needs("tinygrad").load("cpu", "eager")
    from tinygrad import helpers

    if not hasattr(helpers, "NUM_CPU_THREADS"):
        pytest.skip("an older tinygrad is installed")
    from harness.frameworks.tinygrad import _buffer_page_kind

    assert "tinygrad NUM_CPU_THREADS" in adapter.settings()
    assert adapter.settings()["tinygrad device"] == "CPU"
    try:
        assert adapter.buffer_cache_off() == "tinygrad's LRU buffer cache off (helpers.LRU = 0, cached buffers freed)"
    finally:
        adapter.buffer_cache_on()
    assert _buffer_page_kind() == "shmem"


# ---- PaddlePaddle ------------------------------------------------------------------------
def test_paddle_offers_both_recompute_variants_and_records_which():
    assert frameworks.get("paddle").remats == ("none", "native", "native:hooks")
    _needs("paddle")
    assert "use_reentrant=True" in frameworks.get("paddle").load("cpu", "eager", "native").settings()["remat"]
    assert "use_reentrant=False" in frameworks.get("paddle").load("cpu", "eager", "native:hooks").settings()["remat"]


def test_paddle_remat_compiled_is_unavailable_with_the_reason():
    from harness.frameworks.paddle import COMPILED_REMAT

    _needs("paddle")
    with pytest.raises(Unavailable) as err:
        frameworks.get("paddle").load("cpu", "compiled", "native")
    assert str(err.value) == COMPILED_REMAT and "eager only" in COMPILED_REMAT


def test_paddle_records_its_executor_garbage_collection_as_it_runs():
    """A compiled step's figures depend on whether Paddle's executor frees dead
    intermediates (FLAGS_eager_delete_tensor_gb 0, its default) or keeps them for the
    run (< 0: chained_dot small's step peak 50 -> 145 MiB), so the record says which,
    read from Paddle, not assumed."""
    _needs("paddle")
    import paddle

    adapter = frameworks.get("paddle")
    before = paddle.get_flags(["FLAGS_eager_delete_tensor_gb"])["FLAGS_eager_delete_tensor_gb"]
    assert adapter.load("cpu", "compiled").settings()["FLAGS_eager_delete_tensor_gb"] == before
    paddle.set_flags({"FLAGS_eager_delete_tensor_gb": -1.0})
    try:
        assert adapter.load("cpu", "compiled").settings()["FLAGS_eager_delete_tensor_gb"] == -1.0
    finally:
        paddle.set_flags({"FLAGS_eager_delete_tensor_gb": before})


# ---- the breakdown's hooks (harness/measure/breakdown.py) ------------------------------
def _breakdown(name, workload, size, mode="eager", optimizer=None, remat="none"):
    from harness.measure import breakdown
    from harness.measure.phases import Step

    adapter = _needs(name).load("cpu", mode, remat)
    problem = workloads.build(workload, size, "float32")
    step = Step(adapter, problem.loss, adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs),
                mode, optimizer)
    step.run(breakdown.NullMeter())  # the optimizer's state exists after a first step
    return breakdown.count(adapter, step), problem


@pytest.mark.parametrize("workload", ["chained_dot", "rnn_fanout"])
def test_paddle_saved_tensors_are_the_bound(workload):
    found, problem = _breakdown("paddle", workload, "tiny")
    saved, method = found["saved_activations"]
    assert "saved_tensors_hooks" in method
    # chained_dot: matmul saves both operands, x (a param, excluded) and z_0 .. z_{L-1};
    # z_0 is an input, so z_1 .. z_{L-1}: the bound exactly (at small too: 49,000,000
    # bytes). rnn_fanout: h_1 .. h_n plus three (B, 1) float32 arrays of the logistic
    # loss, which the bound leaves out as negligible (the reference engine keeps two:
    # exp's output and log's input; Paddle's tape one more, its multiply's operands
    # being saved whether or not they need a gradient: logit beside label).
    extra = 3 * workloads.get(workload).SIZES["tiny"]["B"] * 4 if workload == "rnn_fanout" else 0
    assert saved == problem.bound_bytes + extra
    assert found["gradients"][0] == found["params"][0] == sum(v.nbytes for v in problem.params.values())


@pytest.mark.parametrize("mode, remat", [("compiled", "none"), ("eager", "native:hooks")])
def test_paddle_says_its_saved_activations_come_from_rss_where_hooks_cannot_list_them(mode, remat):
    from harness.measure import breakdown

    # compiled: the static program keeps its intermediates itself (the hooks see none);
    # native:hooks: the recompute is itself the one pair of hooks Paddle allows (a
    # second pair raised and failed the memory pass)
    found, _ = _breakdown("paddle", "chained_dot", "tiny", mode=mode, remat=remat)
    assert found["saved_activations"] == (None, breakdown.RSS_METHOD)


@pytest.mark.parametrize("name", ["mlx", "tinygrad"])
def test_lazy_rows_have_no_end_of_forward_and_count_their_buffers(name):
    from harness.measure import breakdown

    # (tinygrad: buffer_bytes needs realised moments; lazy ones once grew every step)
    # (rnn_fanout: tinygrad's gradient of W is a transposed view of its buffer)
    found, problem = _breakdown(name, "rnn_fanout", "tiny", optimizer="adam")
    assert found["saved_activations"] == (None, breakdown.NO_SPLIT)
    nbytes = sum(v.nbytes for v in problem.params.values())
    assert found["gradients"][0] == found["params"][0] == nbytes
    assert found["inputs"][0] == sum(v.nbytes for v in problem.inputs.values())
    assert found["optimizer_state"][0] == 2 * nbytes  # Adam's two moments per parameter


def test_check_plans_mlx_in_float32_and_lists_float64_as_skipped_with_why():
    from harness.check import command as check

    planned, skipped = check.plan(["chained_dot"], ["mlx"], "tiny", ["float64", "float32"], ["eager"], 0)
    reasons = [reason for fw, _, reason in skipped if fw == "mlx"]
    if not frameworks.get("mlx").available()[0]:
        assert reasons  # not installed: skipped, saying why
        return
    assert [c["dtype"] for c in planned["mlx"]] == ["float32"]
    assert len(reasons) == 1 and "no float64" in reasons[0] and "Convolution" in reasons[0]
