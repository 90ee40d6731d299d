"""The built-in workloads (harness/workloads/): their interface, seeded inits, losses
written on the op set alone, float32 kept, gradients against central finite
differences, and bounds that scale as their derivations say and stay below what a
store-everything framework really saves.

The framework-agreement tests (every pair against the reference engine) are in
tests/test_check.py, which runs them through `python -m harness check`'s machinery.
"""

import ast
import copy
import inspect
import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from harness import frameworks, ops as contract, workloads
from harness.choices import DTYPES, SIZES

NAMES = workloads.NAMES


# ---- a strict NumPy namespace: test-only, forward values only ------------------------
# Arrays are wrapped in `Opaque`, which has no arithmetic operators, so a workload that
# uses `x + y` instead of `ops.add(x, y)` fails here; every op result is checked to keep
# the float dtype of its array operands (float32 stays float32 inside the workload).


class Opaque:
    __slots__ = ("a",)
    __array_ufunc__ = None  # NumPy must not unwrap it either

    def __init__(self, a):
        self.a = np.asarray(a)

    def __bool__(self):
        raise TypeError("a workload branched on an array's value")


def _np_conv2d(x, w, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwpq,ocpq->nohw", windows, w)


def _np_logsumexp(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


_NUMPY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "sin": np.sin, "cos": np.cos, "matmul": np.matmul,
    "sum": lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
    "mean": lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
    "max": lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
    "reshape": np.reshape, "permute_dims": np.transpose,
    "concat": lambda xs, axis=0: np.concatenate(xs, axis=axis),
    "stack": lambda xs, axis=0: np.stack(xs, axis=axis),
    "getitem": lambda x, key: x[key], "take": lambda x, i, axis=0: np.take(x, i, axis=axis),
    "where": np.where,
    "softmax": lambda x, axis=-1: np.exp(x - _np_logsumexp(x, axis=axis, keepdims=True)),
    "logsumexp": _np_logsumexp, "conv2d": _np_conv2d,
    "max_pool2d": lambda x, size=2: sliding_window_view(x, (size, size), axis=(2, 3))[:, :, ::size, ::size].max(axis=(-2, -1)),
    "upsample2d": lambda x, scale=2: x.repeat(scale, axis=2).repeat(scale, axis=3),
    "cumsum": lambda x, axis: np.cumsum(x, axis=axis),
}  # fmt: skip


class StrictOps:
    """The op contract on NumPy over `Opaque` arrays; records every op it ran.

    ``checkpoint`` and ``chain`` run their function plainly, and check the contract's
    purity: inside a segment every array an op uses must be one of the segment's
    arguments or made inside it, never one from a closure (torch's reentrant
    checkpoint and the engine's remat see only the arguments)."""

    def __init__(self):
        self.calls = []
        self._scopes = []  # per open segment: {id: array} of the arrays it may use
        self._labels = []  # and its name, for the error
        for name, fn in _NUMPY_OPS.items():
            setattr(self, name, self._wrap(name, fn))

    def checkpoint(self, f, *xs):
        self.calls.append("checkpoint")
        return self._segment(f"checkpoint({getattr(f, '__name__', f)})", lambda: f(*xs), xs)

    def chain(self, step, x, n, consts):
        self.calls.append("chain")
        for i in range(n):
            x = self._segment(f"chain step {i} ({getattr(step, '__name__', step)})", lambda: step(i, x, consts), (x, consts))
        return x

    def _segment(self, label, call, args):
        self._scopes.append({id(a): a for a in _arrays(args)})
        self._labels.append(label)
        try:
            out = call()
        finally:
            self._scopes.pop()
            self._labels.pop()
        if self._scopes:  # what a nested segment returns is usable in the enclosing one
            self._scopes[-1].update({id(a): a for a in _arrays([out])})
        return out

    def _wrap(self, name, fn):
        def op(*args, **kwargs):
            floats = set()

            def unwrap(v):
                if isinstance(v, Opaque):
                    if self._scopes and id(v) not in self._scopes[-1]:
                        raise TypeError(f"{name} in {self._labels[-1]}: uses an array that is not an argument "
                                        "of the segment (from a closure)")  # fmt: skip
                    if v.a.dtype.kind == "f":
                        floats.add(v.a.dtype)
                    return v.a
                if isinstance(v, (list, tuple)) and any(isinstance(e, Opaque) for e in v):
                    return [unwrap(e) for e in v]
                if isinstance(v, np.ndarray):
                    raise TypeError(f"{name}: got a bare NumPy array; arrays come from params/inputs")
                return v

            out = np.asarray(fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()}))
            if len(floats) > 1:
                raise TypeError(f"{name}: mixes float dtypes {sorted(map(str, floats))}")
            if floats and out.dtype.kind == "f" and out.dtype not in floats:
                raise TypeError(f"{name}: {floats.pop()} operands gave a {out.dtype} result")
            self.calls.append(name)
            result = Opaque(out)
            if self._scopes:
                self._scopes[-1][id(result)] = result
            return result

        return op


def _arrays(values):
    """The Opaque arrays in a sequence of arrays, dicts and lists of them."""
    for v in values:
        if isinstance(v, Opaque):
            yield v
        elif isinstance(v, dict):
            yield from _arrays(v.values())
        elif isinstance(v, (list, tuple)):
            yield from _arrays(v)


def strict_loss(name, size, dtype, seed=0):
    problem = workloads.build(name, size, dtype, seed=seed)
    ops = StrictOps()
    wrap = lambda tree: {k: Opaque(v) for k, v in tree.items()}
    value = problem.loss(ops, wrap(problem.params), wrap(problem.inputs))
    assert isinstance(value, Opaque), "the loss must be an array made by the ops"
    return value.a, ops


def test_the_strict_namespace_covers_the_contract():
    assert contract.missing_ops(StrictOps()) == []


def test_the_strict_namespace_rejects_a_segment_that_reads_a_closure():
    ops, a, b = StrictOps(), Opaque(np.ones(2)), Opaque(np.ones(2))
    assert ops.checkpoint(lambda x: ops.mul(x, x), a).a.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="not an argument of the segment"):
        ops.checkpoint(lambda x: ops.mul(x, b), a)
    with pytest.raises(TypeError, match="chain step 0"):
        ops.chain(lambda i, x, c: ops.mul(x, b), a, 2, {})
    # made inside, or passed in consts: fine
    assert ops.chain(lambda i, x, c: ops.mul(ops.add(x, c["b"]), 1.0), a, 2, {"b": b}).a.tolist() == [3.0, 3.0]


# ---- interface and init ----------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_interface(name):
    module = workloads.get(name)
    assert module.SOURCE and module.STRESSES
    assert isinstance(module.SEGMENTS, str)
    assert set(module.SIZES) == set(SIZES)
    for attr in ("init", "loss", "bound_bytes"):
        assert callable(getattr(module, attr))
    assert list(inspect.signature(module.loss).parameters) == ["ops", "params", "inputs", "cfg"]
    assert list(inspect.signature(module.init).parameters) == ["rng", "cfg", "dtype"]
    assert list(inspect.signature(module.bound_bytes).parameters) == ["cfg", "dtype"]
    assert all(module.BATCH_AXIS in module.SIZES[size] for size in SIZES)


@pytest.mark.parametrize("name", NAMES)
def test_imports_no_framework(name):
    # A workload is written once against the op set: NumPy (for init), math and the
    # harness's workload helpers only.
    tree = ast.parse(inspect.getsource(workloads.get(name)))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"math", "numpy", "harness"}, imported


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_init_is_seeded_typed_and_well_scaled(name, dtype):
    a = workloads.build(name, "tiny", dtype, seed=3)
    b = workloads.build(name, "tiny", dtype, seed=3)
    c = workloads.build(name, "tiny", dtype, seed=4)
    for tree_a, tree_b, tree_c in ((a.params, b.params, c.params), (a.inputs, b.inputs, c.inputs)):
        assert list(tree_a) == list(tree_b)
        for k in tree_a:
            np.testing.assert_array_equal(tree_a[k], tree_b[k])
    assert any(not np.array_equal(a.params[k], c.params[k]) for k in a.params)
    for k, v in a.params.items():
        assert v.dtype == np.dtype(dtype), k  # params are the gradient's variables: all float
    for k, v in a.inputs.items():
        assert v.dtype == np.dtype(dtype) or v.dtype.kind in "iub", (k, v.dtype)
    for k, v in {**a.params, **a.inputs}.items():
        if v.dtype.kind == "f":
            assert np.all(np.isfinite(v)) and np.max(np.abs(v)) < 10, k  # O(1) values


@pytest.mark.parametrize("size", ["tiny", "small"])
@pytest.mark.parametrize("name", NAMES)
def test_the_float32_problem_is_the_float64_one_rounded(name, size):
    # check compares a float32 run with the float64 reference at the float32-rounded
    # point; the two inits must describe the same problem.
    p32, p64 = workloads.build(name, size, "float32"), workloads.build(name, size, "float64")
    for k in p64.params:
        np.testing.assert_array_equal(p32.params[k], p64.params[k].astype(np.float32))
    for k in p64.inputs:
        np.testing.assert_array_equal(p32.inputs[k], p64.inputs[k].astype(p32.inputs[k].dtype))


# ---- the loss: op set only, dtype kept, O(1) -----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_loss_uses_only_the_op_set_and_keeps_the_dtype(name, dtype):
    value, ops = strict_loss(name, "tiny", dtype)
    assert value.shape == () and value.dtype == np.dtype(dtype)
    assert np.isfinite(value) and abs(float(value)) < 100
    assert set(ops.calls) <= set(contract.OPS)


@pytest.mark.parametrize("name", NAMES)
def test_loss_at_small_is_finite_and_well_scaled(name):
    # The CI size, in float32: no overflow, no NaN (denormals would show as slowness).
    value, _ = strict_loss(name, "small", "float32")
    assert np.isfinite(value) and abs(float(value)) < 1e4


def test_workload_specific_structure():
    # the transposes of shared_linear are taken inside the loop, one per use (PR #4746)
    _, ops = strict_loss("shared_linear", "tiny", "float64")
    assert ops.calls.count("permute_dims") == workloads.get("shared_linear").SIZES["tiny"]["K"]
    # seq2seq's cross-entropy gathers from the flat log-probs: no one-hot of the vocabulary
    _, ops = strict_loss("seq2seq_attention", "tiny", "float64")
    assert ops.calls.count("take") == 3 and ops.calls.count("logsumexp") == 1
    # the U-Net concatenates one skip per level
    _, ops = strict_loss("unet", "tiny", "float64")
    assert ops.calls.count("concat") == workloads.get("unet").SIZES["tiny"]["levels"]


@pytest.mark.parametrize("name", NAMES)
def test_segments_are_marked_as_declared(name):
    # SEGMENTS says what the loss marks; the strict namespace counts the marks (and has
    # checked that no segment reads an array from a closure).
    _, ops = strict_loss(name, "tiny", "float64")
    marks = (ops.calls.count("chain"), ops.calls.count("checkpoint"))
    levels = workloads.get("unet").SIZES["tiny"]["levels"]
    want = {
        "chained_dot": (1, 0),  # the L products
        "rnn_fanout": (1, 0),  # the n steps
        "tiny_nerf": (0, 2),  # layers 0-4 (with the skip concat), 5-7
        "unet": (0, 2 * levels + 1),  # levels + 1 encoder blocks, levels decoder steps
        "transformer_block": (0, 2),  # the attention, the MLP
    }.get(name, (0, 0))
    assert marks == want
    assert bool(workloads.get(name).SEGMENTS) == (want != (0, 0))
    assert (name in workloads.with_segments()) == (want != (0, 0))


# ---- gradients against central finite differences ------------------------------------------


def directional_fd_errors(adapter, name, eps=1e-6, seed=1):
    """{param: relative error} of the adapter's gradient along a random direction per
    param, against the central difference (L(p + eps d) - L(p - eps d)) / 2 eps of the
    loss run in the same framework, float64 at tiny."""
    problem = workloads.build(name, "tiny", "float64")
    step = adapter.value_and_grad(problem.loss, "eager")
    inputs = adapter.from_numpy(problem.inputs)
    _, grads = step(adapter.from_numpy(problem.params), inputs)
    grads = adapter.to_numpy(grads)
    loss_at = lambda p: float(adapter.to_numpy(step(adapter.from_numpy(p), inputs)[0]))
    rng = np.random.default_rng(seed)
    errors = {}
    for k, p in problem.params.items():
        d = rng.standard_normal(p.shape)
        plus, minus = dict(problem.params), dict(problem.params)
        plus[k], minus[k] = p + eps * d, p - eps * d
        fd = (loss_at(plus) - loss_at(minus)) / (2 * eps)
        analytic = float(np.sum(grads[k] * d))
        errors[k] = abs(fd - analytic) / max(abs(analytic), 1e-8)
    return errors


def loaded(name):
    try:
        adapter = frameworks.get(name)
    except ImportError as err:
        pytest.skip(f"{name} adapter cannot be imported: {err}")
    ok, reason = adapter.available()
    if not ok:
        pytest.skip(reason)
    return adapter.load("cpu", "eager")


@pytest.mark.parametrize("name", NAMES)
def test_reference_gradient_matches_finite_differences(name):
    # The engine's own check (harness.engine.testing.check_grads: a random cotangent
    # and a random direction over all params at once) ...
    adapter = loaded("reference")
    from harness.engine.testing import check_grads

    problem = workloads.build(name, "tiny", "float64")
    check_grads(lambda p: problem.loss(adapter.ops, p, problem.inputs), problem.params, argnums=0)
    # ... and one direction per param through the adapter, as check uses it.
    errors = directional_fd_errors(adapter, name)
    # central differences in float64 with eps 1e-6 are good to ~1e-8 on these O(1) losses
    assert max(errors.values()) < 1e-5, errors


@pytest.mark.parametrize("name", NAMES)
def test_autograd_gradient_matches_finite_differences(name):
    # The same check through HIPS autograd: the workloads themselves are differentiable
    # where they are evaluated (no kink of relu/max sits within eps of a sample point).
    errors = directional_fd_errors(loaded("autograd"), name)
    assert max(errors.values()) < 1e-5, errors


# ---- bounds ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_bound_is_positive_and_counts_bytes_of_the_dtype(name):
    for size in SIZES:
        b32, b64 = workloads.bound_bytes(name, size, "float32"), workloads.bound_bytes(name, size, "float64")
        assert isinstance(b32, int) and b32 > 0
        assert b64 == 2 * b32
    assert workloads.bound_bytes(name, "tiny", "float32") < workloads.bound_bytes(name, "small", "float32")


def bound_with(monkeypatch, name, **changes):
    module = workloads.get(name)
    sizes = copy.deepcopy(module.SIZES)
    sizes["tiny"].update(changes)
    monkeypatch.setattr(module, "SIZES", sizes)
    return workloads.bound_bytes(name, "tiny", "float32")


@pytest.mark.parametrize("name", NAMES)
def test_bound_is_linear_in_the_batch(name):
    # every activation a store-everything backward keeps has the batch axis: one more
    # sample keeps the same bytes again (what `harness scale` fits per sample)
    b = workloads.get(name).SIZES["tiny"][workloads.get(name).BATCH_AXIS]
    bounds = [workloads.bound_bytes(name, "tiny", "float32", batch=k * b) for k in (1, 2, 3)]
    assert bounds[0] > 0 and bounds[1] == 2 * bounds[0] and bounds[2] == 3 * bounds[0], bounds


#: (workload, size knob, whether the bound is linear in it, not only affine)
SCALING = [
    ("chained_dot", "L", False),  # L - 1 stored products: affine in L
    ("rnn_fanout", "n", True),  # n hidden states
    ("rnn_fanout", "B", True),
    ("shared_linear", "K", True),  # K uses
    ("shared_linear", "B", True),
    ("tiny_nerf", "rays", True),  # everything is per sample
    ("tiny_nerf", "samples", True),
    ("unet", "N", True),  # per image
    ("seq2seq_attention", "B", True),  # every stored tensor has a batch axis
    ("seq2seq_attention", "T_tgt", False),  # per decoder step, plus the encoder: affine
    ("transformer_block", "B", True),  # per sequence
    ("transformer_block", "F", False),  # the relu output T F, plus the rest: affine
]


@pytest.mark.parametrize("name, knob, linear", SCALING)
def test_bound_scales_as_derived(monkeypatch, name, knob, linear):
    base = workloads.get(name).SIZES["tiny"][knob]
    b1 = bound_with(monkeypatch, name, **{knob: base})
    b2 = bound_with(monkeypatch, name, **{knob: 2 * base})
    b3 = bound_with(monkeypatch, name, **{knob: 3 * base})
    assert b3 - b2 == b2 - b1 > 0  # affine in the knob
    if linear:
        assert b2 == 2 * b1


def test_bound_details(monkeypatch):
    # chained_dot: D x cols per product
    assert bound_with(monkeypatch, "chained_dot", D=64, cols=64) == 4 * bound_with(monkeypatch, "chained_dot", D=32, cols=32)
    assert bound_with(monkeypatch, "chained_dot", cols=64) == 2 * bound_with(monkeypatch, "chained_dot", cols=32)
    # U-Net: every stored map is an image, so 4x the pixels is 4x the bytes
    assert bound_with(monkeypatch, "unet", HW=16) == 4 * bound_with(monkeypatch, "unet", HW=8)
    # tiny NeRF: depth * width per sample plus 4 rendering values
    c = workloads.get("tiny_nerf").SIZES["paper"]
    assert workloads.bound_bytes("tiny_nerf", "paper", "float32") == 65536 * (8 * 256 + 4) * 4 == c["rays"] * c["samples"] * 2052 * 4
    # rnn_fanout paper: the hidden-state tape, n = 50 steps of a (B, D) float32 state = 3.1 MiB
    assert workloads.bound_bytes("rnn_fanout", "paper", "float32") == 50 * 16 * 1024 * 4


def torch_memory(name, size="tiny", dtype="float32"):
    """(peak, saved) bytes of one PyTorch eager gradient, params and inputs excluded:
    the peak of torch's CPU allocations over forward + backward (torch.profiler's
    memory events, from a baseline that holds the params and inputs), and the bytes of
    the distinct storages autograd saves for backward (`saved_tensors_hooks`). PyTorch
    eager is a store-everything reverse pass, so both are real figures to test a
    bound against."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    adapter = loaded("torch")
    problem = workloads.build(name, size, dtype)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in problem.params.items()}
    inputs = {k: torch.tensor(v) for k, v in problem.inputs.items()}
    given = {t.untyped_storage().data_ptr() for t in (*params.values(), *inputs.values())}
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in given:
            storages[s.data_ptr()] = s.nbytes()
        return t

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = problem.loss(adapter.ops, params, inputs)
        grads = torch.autograd.grad(loss, list(params.values()))
        del loss, grads
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()  # + on allocation, - on free
        peak = max(peak, live)
    return peak, sum(storages.values()), problem.bound_bytes


@pytest.mark.parametrize("name", NAMES)
def test_bound_is_below_what_torch_holds_and_not_vacuous(name):
    peak, saved, bound = torch_memory(name)
    # A lower bound on the peak of any store-everything reverse pass: PyTorch eager's
    # measured peak must reach it (what the measurement asserts for every framework).
    assert bound <= peak
    # Not vacuous: the bound accounts for a good part of what torch saves (torch also
    # saves copies the bounds leave out: concatenations, whole (B, 3H) GRU matmul
    # outputs for one gate, (h - n) ...).
    assert bound >= 0.3 * saved, (bound, saved)


@pytest.mark.parametrize("name", NAMES)
def test_bound_is_below_the_reference_engines_peak(name):
    # The reference engine stores activations too; its ledger's peak (live bytes of
    # every buffer it allocated, params and inputs not included) must reach the bound.
    adapter = loaded("reference")
    problem = workloads.build(name, "small", "float32")
    with adapter.saving():  # the ledger counts in the breakdown's steps
        adapter.value_and_grad(problem.loss)(problem.params, problem.inputs)
    assert adapter.last_ledger.peak_bytes >= problem.bound_bytes


# ---- the batch axis (harness scale) ------------------------------------------------------


def _nbytes(tree):
    return sum(v.nbytes for v in tree.values())


@pytest.mark.parametrize("name", NAMES)
def test_the_batch_axis_counts_samples(name):
    # `harness scale` fits peak = fixed + per_sample x batch and divides the slope by
    # the bound per sample, so: the bound is linear in the batch through zero (every
    # term of its derivation has one factor of it), the params do not depend on it, the
    # inputs grow by the same bytes per sample, and the loss runs at batch 1.
    per_sample = workloads.bound_per_sample(name, "tiny", "float32")
    for batch in (1, 2, 3, 7):
        assert workloads.bound_bytes(name, "tiny", "float32", batch=batch) == batch * per_sample
    built = {b: workloads.build(name, "tiny", "float32", batch=b) for b in (1, 2, 3)}
    assert all(p.batch == b and p.bound_bytes == b * per_sample for b, p in built.items())
    shapes = {b: {k: v.shape for k, v in p.params.items()} for b, p in built.items()}
    assert shapes[1] == shapes[2] == shapes[3]
    grow = [_nbytes(built[b].inputs) for b in (1, 2, 3)]
    assert grow[2] - grow[1] == grow[1] - grow[0] > 0
    for b in (1, 3):
        value, _ = strict_loss_at(name, b)
        assert np.isfinite(value)


def strict_loss_at(name, batch):
    problem = workloads.build(name, "tiny", "float32", batch=batch)
    ops = StrictOps()
    wrap = lambda tree: {k: Opaque(v) for k, v in tree.items()}
    return problem.loss(ops, wrap(problem.params), wrap(problem.inputs)).a, ops


def test_the_default_batch_is_the_size_s_own():
    # chained_dot's columns stay D, so its figures (and the asv history) do not move.
    module = workloads.get("chained_dot")
    assert all(cfg["cols"] == cfg["D"] for cfg in module.SIZES.values())
    default, explicit = workloads.build("chained_dot", "tiny", "float64"), workloads.build(
        "chained_dot", "tiny", "float64", batch=module.SIZES["tiny"]["cols"])
    assert np.array_equal(default.inputs["z"], explicit.inputs["z"]) and default.batch == 32
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive int"):
            workloads.config("rnn_fanout", "tiny", bad)


@pytest.mark.parametrize("name", NAMES)
def test_reference_gradient_at_batch_1_matches_finite_differences(name):
    adapter = loaded("reference")
    from harness.engine.testing import check_grads

    problem = workloads.build(name, "tiny", "float64", batch=1)
    check_grads(lambda p: problem.loss(adapter.ops, p, problem.inputs), problem.params, argnums=0)
