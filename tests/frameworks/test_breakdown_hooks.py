"""The breakdown's per-framework hooks, measured against bounds from the math.

Each workload's `bound_bytes` is defined as the activations a store-everything reverse
pass must keep at the end of forward; the hooks count what each framework really keeps
(harness/measure/breakdown.py), so on the workloads where the reference engine keeps
nothing more, the two must meet."""

import pytest

from harness import frameworks, workloads
from harness.frameworks.base import Adapter
from harness.measure import breakdown
from one_step import stepped
from own_process import OWN_PROCESS, in_this_process

pytestmark = pytest.mark.slow  # acceptance: every framework's breakdown at small


def counted(name, workload, size="small", optimizer=None):
    adapter, step, problem = stepped(name, workload, size, optimizer)  # the optimizer's state exists after it
    found = breakdown.count(adapter, step)
    return found, problem


@pytest.mark.parametrize("workload", ["chained_dot", "rnn_fanout"])
@pytest.mark.parametrize("size", ["tiny", "small"])
def test_the_reference_engine_saves_exactly_the_bound_and_returns_param_sized_gradients(workload, size):
    found, problem = counted("reference", workload, size)
    saved, method = found["saved_activations"]
    assert "ledger" in method
    # chained_dot: z_1 .. z_{L-1}, exactly the bound. rnn_fanout: h_1 .. h_n, plus one
    # (B, 1) array of the logistic loss the bound leaves out as negligible: exp's VJP
    # keeps its output e = exp(-logit); log's VJP reads its input e + 1, remade from e.
    extra = workloads.get(workload).SIZES[size]["B"] * 4 if workload == "rnn_fanout" else 0
    assert saved == problem.bound_bytes + extra
    if size == "small":
        assert abs(saved - problem.bound_bytes) <= 0.01 * problem.bound_bytes
    # one gradient per parameter, each of the parameter's shape and dtype
    assert found["gradients"][0] == found["params"][0] == sum(v.nbytes for v in problem.params.values())
    assert found["inputs"][0] == sum(v.nbytes for v in problem.inputs.values())
    assert found["optimizer_state"][0] == 0


def test_torch_saved_tensors_on_chained_dot_are_the_bound():
    found, problem = counted("torch", "chained_dot")
    saved, method = found["saved_activations"]
    assert "saved_tensors_hooks" in method
    # mm saves both operands: x (a param, excluded) and z_0 .. z_{L-1}; z_0 is an input.
    assert abs(saved - problem.bound_bytes) <= 0.05 * problem.bound_bytes, (saved, problem.bound_bytes)


def test_jax_residuals_on_chained_dot_are_the_bound():
    found, problem = counted("jax", "chained_dot")
    saved, method = found["saved_activations"]
    assert "residuals" in method
    assert abs(saved - problem.bound_bytes) <= 0.05 * problem.bound_bytes, (saved, problem.bound_bytes)


def test_pytensor_counts_its_split_outputs():
    found, problem = counted("pytensor", "chained_dot", "tiny")
    saved, method = found["saved_activations"]
    assert "compiled forward returns" in method
    assert saved >= problem.bound_bytes  # every z_i the backward reads leaves the forward


@pytest.mark.parametrize("name", frameworks.NAMES)
def test_every_row_counts_what_chained_dot_saves_or_says_why_not(name):
    if not in_this_process(name):
        pytest.skip(OWN_PROCESS[name])
    adapter, step, problem = stepped(name, "chained_dot", "tiny")
    saved, method = breakdown.count(adapter, step)["saved_activations"]
    if adapter.saved_activations_from_rss:  # no way to list them (TF, autograd): RSS, said so
        assert (saved, method) == (None, breakdown.RSS_METHOD)
    elif step.kind == "joint":  # one lazy call (MLX, tinygrad): no end of forward to count at
        assert saved is None and "no forward/backward split" in method, method
    else:  # z_1 .. z_{L-1}: the bound exactly (measured so on every row that lists them)
        assert saved == problem.bound_bytes, (saved, problem.bound_bytes, method)


def test_adam_state_is_two_moments_per_parameter():
    for name in ("torch", "reference"):
        found, problem = counted(name, "rnn_fanout", "tiny", optimizer="adam")
        moments = 2 * sum(v.nbytes for v in problem.params.values())
        steps = 4 * len(problem.params) if name == "torch" else 0  # torch.optim.Adam's float32 step counters
        assert found["optimizer_state"][0] == moments + steps, name


def test_an_adapter_without_a_hook_gets_null_with_the_reason():
    class Bare(Adapter):
        name = "bare"

    value, reason = Bare().saved_activation_bytes(None, {}, {})
    assert value is None and "no way to count" in reason
