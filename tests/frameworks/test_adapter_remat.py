"""Remat in every framework adapter of the registry: every strategy an adapter offers
gives the value and gradients of remat "none" on every workload that marks segments, it
really recomputes, "none" is the plain op set, and a strategy it lacks or a malformed
one is a clear error. An adapter is left out of a test only by an entry of an
`*_ELSEWHERE` map saying where it is tested instead (checked by the last tests here).
"""

import importlib.util

import numpy as np
import pytest

from harness import frameworks, workloads
from harness.choices import ChoiceError
from harness.frameworks import remat
from harness.frameworks.base import Unavailable
from own_process import OWN_PROCESS, in_this_process

#: adapters these tests leave out, and where their remat is tested instead
ELSEWHERE = {
    "reference": "its strategies (sqrt, revolve:S, articulation and native) are the engine's own: "
                 "tests/engine/ and test_reference_adapter.py",
}
ADAPTERS = tuple(name for name in frameworks.NAMES if name not in ELSEWHERE)
SEGMENTED = workloads.with_segments()


def _installed(name):
    return importlib.util.find_spec(frameworks.get(name).module) is not None and frameworks.get(name).available()[0]


def _dtype(name):
    """float64 where the adapter has it (equal up to rounding), else float32 (MLX)."""
    return "float64" if "float64" in frameworks.get(name).dtypes else "float32"


RTOL = {"float64": 1e-12, "float32": 1e-5}


def _params(with_remats):
    """(adapter) or (adapter, remat) for every remat but none, skipped when missing."""
    out = []
    for name in ADAPTERS:
        mark = () if _installed(name) else (pytest.mark.skip(reason=f"{name} is not installed"),)
        if not in_this_process(name):
            mark = (pytest.mark.skip(reason=OWN_PROCESS[name]),)
        if not with_remats:
            out.append(pytest.param(name, id=name, marks=mark))
            continue
        out += [pytest.param(name, r, id=f"{name}-{r}", marks=mark) for r in frameworks.get(name).remats if r != "none"]
    return out


NAMES = _params(with_remats=False)
NAME_REMATS = _params(with_remats=True)
_LOADED = {}


def loaded(name, mode="eager", remat_name="none"):
    key = (name, mode, remat_name)
    if key not in _LOADED:
        _LOADED[key] = frameworks.get(name).load("cpu", mode, remat_name)
    return _LOADED[key]


def run(adapter, problem, mode="eager"):
    step = adapter.value_and_grad(problem.loss, mode)
    loss, grads = step(adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs))
    return float(adapter.to_numpy(loss)), adapter.to_numpy(grads)


def assert_same(got, want, rtol):
    (loss, grads), (loss0, grads0) = got, want
    np.testing.assert_allclose(loss, loss0, rtol=rtol)
    assert set(grads) == set(grads0)
    for k in grads0:
        scale = np.max(np.abs(grads0[k]))
        np.testing.assert_allclose(grads[k], grads0[k], rtol=rtol, atol=rtol * scale, err_msg=k)


# ---- errors -------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_remats_parse_and_start_with_none(name):
    offered = frameworks.get(name).remats
    assert offered[0] == "none"
    for text in offered:  # spelled as parse_remat reads them, and as it writes them back
        assert remat.format_remat(*remat.parse_remat(text)) == text


@pytest.mark.parametrize("name", NAMES)
def test_a_strategy_the_adapter_lacks_is_unavailable_naming_its_offers(name):
    adapter = frameworks.get(name)
    lacking = [r for r in ("native", "native:no_such_variant", "sqrt", "revolve:3", "articulation")
               if r not in adapter.remats]  # fmt: skip
    assert lacking
    for text in lacking:
        with pytest.raises(Unavailable) as err:
            adapter.load("cpu", "eager", text)
        message = str(err.value)
        assert name in message and repr(text) in message
        assert all(offer in message for offer in adapter.remats), message


@pytest.mark.parametrize("name", NAMES)
def test_a_malformed_remat_is_a_choice_error_naming_the_strategies(name):
    for text in ("turbo", "revolve", "revolve:0", "sqrt:2", ""):
        with pytest.raises(ChoiceError) as err:
            frameworks.get(name).load("cpu", "eager", text)
        assert all(s in str(err.value) for s in ("none", "native", "sqrt", "revolve:S", "articulation"))


# ---- remat "none" is the plain op set ---------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow  # acceptance: every framework's remat on every workload
def test_none_uses_the_plain_call_and_loop(name):
    ops = loaded(name).ops
    assert ops.checkpoint is remat.checkpoint and ops.chain is remat.chain


def _plain_chained_dot(ops, params, inputs):
    """chained_dot's loss as it was before the chain op: the Python loop."""
    z = inputs["z"]
    for _ in range(workloads.get("chained_dot").SIZES["tiny"]["L"]):
        z = ops.matmul(params["x"], z)
    return ops.sum(z)


def test_none_gives_jax_the_same_program_as_the_plain_loop():
    if not _installed("jax"):
        pytest.skip("jax is not installed")
    import jax

    ops, problem = loaded("jax").ops, workloads.build("chained_dot", "tiny", "float32")
    jaxpr = lambda loss: str(jax.make_jaxpr(jax.value_and_grad(lambda p: loss(ops, p, problem.inputs)))(problem.params))
    assert jaxpr(problem.loss) == jaxpr(_plain_chained_dot)


def _torch_graph(loss):
    """The names of the autograd nodes reachable from loss.grad_fn, in walk order."""
    names, stack, seen = [], [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(type(node).__name__)
        stack += [child for child, _ in node.next_functions]
    return names


@pytest.mark.parametrize("remat_name", ["none", "native"])
@pytest.mark.slow  # acceptance: every framework's remat on every workload
def test_torch_graph_of_none_is_the_plain_loop_and_native_differs(remat_name):
    if not _installed("torch"):
        pytest.skip("torch is not installed")
    import torch

    problem = workloads.build("chained_dot", "tiny", "float32")
    ops = loaded("torch", remat_name=remat_name).ops
    params = {k: torch.tensor(v, requires_grad=True) for k, v in problem.params.items()}
    inputs = {k: torch.tensor(v) for k, v in problem.inputs.items()}
    # the non-reentrant checkpoint records the same node types (it hooks the saved
    # tensors, not the graph); what differs is what the graph saves
    assert _torch_graph(problem.loss(ops, params, inputs)) == _torch_graph(_plain_chained_dot(ops, params, inputs))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.shape) or t, lambda t: t):
        problem.loss(ops, params, inputs)
    L = workloads.get("chained_dot").SIZES["tiny"]["L"]
    if remat_name == "none":
        # z_{i+1} = x @ z_i saves z_i for x's gradient, and x for z_i's from the second
        # product on (z_0 is data): 2L - 1 tensors
        assert len(saved) == 2 * L - 1, saved
    else:
        # seen from outside, a checkpointed segment saves at most its inputs (x, z_i)
        assert len(saved) <= 2 * len(remat.sqrt_segments(L)) < 2 * L - 1, saved


# ---- every offered strategy: same numbers, and it recomputes ------------------------------
# JAX eager compiles every primitive and every checkpointed segment on first use: unet
# costs ~25 s there (jit: ~7 s per remat). Its checkpoint segments go through the same
# adapter code as tiny_nerf's, which runs. (Checked by hand: equal, jit and eager.)
SLOW = {("jax", "unet"): "jax eager unet compiles for ~25 s; same checkpoint path as tiny_nerf"}


@pytest.mark.parametrize("workload", SEGMENTED)
@pytest.mark.parametrize("name, remat_name", NAME_REMATS)
@pytest.mark.slow  # acceptance: every framework's remat on every workload
def test_native_remat_gives_the_values_and_gradients_of_none(name, remat_name, workload):
    if (name, workload) in SLOW:
        pytest.skip(SLOW[name, workload])
    dtype = _dtype(name)
    problem = workloads.build(workload, "tiny", dtype)
    # Same ops in the same order, recomputed: equal up to summation-order rounding.
    assert_same(run(loaded(name, remat_name=remat_name), problem), run(loaded(name), problem), rtol=RTOL[dtype])


#: compiled adapters whose remat is eager only (test_eager_only_remat_is_unavailable_compiled)
EAGER_ONLY_REMAT = {"paddle": "to_static does not translate fleet recompute (paddle.py COMPILED_REMAT)"}
COMPILED = [p for p in NAME_REMATS if "compiled" in frameworks.get(p.values[0]).modes
            and p.values[0] not in EAGER_ONLY_REMAT]


@pytest.mark.parametrize("name, remat_name", COMPILED)
@pytest.mark.slow  # acceptance: every framework's remat on every workload
def test_native_remat_compiled_gives_the_eager_gradients(name, remat_name):
    # One small graph per compiled (torch.compile: ~5 s cold); chained_dot's chain.
    problem = workloads.build("chained_dot", "tiny", "float32")
    got = run(loaded(name, "compiled", remat_name), problem, "compiled")
    assert_same(got, run(loaded(name), problem), rtol=1e-5)


def _counting_loss(counts):
    """A loss with one checkpoint (2 tanh layers) and one 4-step chain; counts how many
    times the segment and the steps run in Python."""

    def loss(ops, params, inputs):
        def segment(x, p):
            counts["segment"] += 1
            return ops.tanh(ops.matmul(ops.tanh(ops.matmul(x, p["a"])), p["b"]))

        def step(i, h, c):
            counts["step"] += 1
            return ops.tanh(ops.matmul(h, c["w"]))

        h = ops.checkpoint(segment, inputs["x"], {"a": params["a"], "b": params["b"]})
        return ops.sum(ops.chain(step, h, 4, {"w": params["w"]}))

    return loss


def _counting_problem(dtype="float64"):
    rng = np.random.default_rng(0)
    params = {k: (rng.standard_normal((3, 3)) / 2).astype(dtype) for k in ("a", "b", "w")}
    return params, {"x": rng.standard_normal((2, 3)).astype(dtype)}


#: adapters whose recomputation no Python counter sees, and the test that sees it instead
RECOMPUTE_SEEN_ELSEWHERE = {
    "jax": "recomputes from the traced jaxpr, not by calling Python again: "
           "test_jax_native_puts_every_segment_in_a_checkpoint counts its remat equations",
}


@pytest.mark.parametrize("name, remat_name", [p for p in NAME_REMATS if p.values[0] not in RECOMPUTE_SEEN_ELSEWHERE])
@pytest.mark.slow  # acceptance: every framework's remat on every workload
def test_native_remat_runs_the_segments_again_in_the_backward_pass(name, remat_name):
    params, inputs = _counting_problem(_dtype(name))
    for r in ("none", remat_name):
        adapter, counts = loaded(name, remat_name=r), {"segment": 0, "step": 0}
        adapter.value_and_grad(_counting_loss(counts))(adapter.from_numpy(params), adapter.from_numpy(inputs))
        if r == "none":
            assert counts == {"segment": 1, "step": 4}  # once each: nothing recomputed
        else:
            # recomputed at least once in the backward pass (autograd.checkpoint re-runs
            # a segment once per traced argument: more)
            assert counts["segment"] >= 2 and counts["step"] >= 8, counts


@pytest.mark.parametrize("remat_name", [r for r in ("native", "native:dots_saveable")])
def test_jax_native_puts_every_segment_in_a_checkpoint(remat_name):
    # JAX recomputes from the traced jaxpr, not by calling Python again: count the
    # checkpoint (remat) equations of the gradient program instead. chained_dot tiny has
    # L = 5 products: sqrt_segments(5) = 3 segments.
    if not _installed("jax"):
        pytest.skip("jax is not installed")
    import jax

    problem = workloads.build("chained_dot", "tiny", "float32")
    for r, want in (("none", 0), (remat_name, len(remat.sqrt_segments(5)))):
        ops = loaded("jax", remat_name=r).ops
        jaxpr = jax.make_jaxpr(jax.grad(lambda p: problem.loss(ops, p, problem.inputs)))(problem.params)
        found = [e for e in jaxpr.jaxpr.eqns if "remat" in e.primitive.name or e.primitive.name == "checkpoint"]
        assert len(found) == want, jaxpr
        policies = {e.params.get("policy") for e in found}
        if r == "native:dots_saveable":
            assert policies == {jax.checkpoint_policies.dots_with_no_batch_dims_saveable}, policies
        elif r == "native":
            assert policies == {None}


def test_torch_reentrant_split_vjp_gives_the_gradients():
    # The reentrant checkpoint refuses torch.autograd.grad; the adapter's backward runs
    # loss.backward() on the leaves instead, in the split phases too.
    if not _installed("torch"):
        pytest.skip("torch is not installed")
    problem = workloads.build("rnn_fanout", "tiny", "float64")
    adapter = loaded("torch", remat_name="native:reentrant")
    forward, backward = adapter.split_vjp(problem.loss)
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
    grads = adapter.to_numpy(backward(forward(params, inputs)))
    assert_same((0.0, grads), (0.0, run(loaded("torch"), problem)[1]), rtol=1e-12)


# ---- the adapters left out above, each with where it is tested instead ---------------------
@pytest.mark.parametrize("name, remat_name", [p for p in NAME_REMATS if p.values[0] in EAGER_ONLY_REMAT])
def test_eager_only_remat_is_unavailable_compiled(name, remat_name):
    with pytest.raises(Unavailable):
        frameworks.get(name).load("cpu", "compiled", remat_name)


def test_every_adapter_left_out_is_a_registry_row_with_a_reason():
    for left_out in (ELSEWHERE, EAGER_ONLY_REMAT, RECOMPUTE_SEEN_ELSEWHERE):
        for name, reason in left_out.items():
            assert name in frameworks.NAMES and reason.strip(), (name, reason)
    assert set(ADAPTERS) | set(ELSEWHERE) == set(frameworks.NAMES)
    # the reference's remat has its own tests; a row left out of the compiled or the
    # recompute test offers a remat (else there is nothing to leave out)
    assert all(len(frameworks.get(n).remats) > 1 for n in (*EAGER_ONLY_REMAT, *RECOMPUTE_SEEN_ELSEWHERE))
    assert all("compiled" in frameworks.get(n).modes for n in EAGER_ONLY_REMAT)
