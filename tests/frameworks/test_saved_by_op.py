"""Saved activations by op (harness/measure/saved_ops.py), at tiny sizes.

The reference engine's list must sum to its saved-activations figure exactly (both
read the same ledger); every other adapter that lists ops (torch's and Paddle's
saved-tensor hooks, JAX's saved residuals) to its saved-activations figure within 1 %
(each buffer attributed to the op that made it: a buffer dropped or counted twice
breaks the sum); every adapter that does not says why. Bounds from the math:
rnn_fanout saves h_1 .. h_n (tanh outputs, B x D each) for the backward."""

import pytest

from harness import frameworks, workloads
from harness.frameworks.base import Adapter
from harness.measure import saved_ops
from harness.measure.phases import NullMeter, Step
from one_step import stepped
from own_process import OWN_PROCESS, in_this_process


#: the registry rows whose adapter lists which op made each saved buffer, and the rest
LISTS_OPS = [n for n in frameworks.NAMES if type(frameworks.get(n)).saved_by_op is not Adapter.saved_by_op]
NO_LIST = [n for n in frameworks.NAMES if n not in LISTS_OPS]


def measured(name, workload, size="tiny"):
    if not in_this_process(name):
        pytest.skip(OWN_PROCESS[name])
    adapter, step, problem = stepped(name, workload, size)
    return saved_ops.measure(adapter, step), problem


@pytest.mark.parametrize("workload", workloads.NAMES)
def test_reference_ops_sum_exactly_to_its_saved_activations(workload):
    found, _ = measured("reference", workload)
    assert found["ops"], found["method"]
    assert found["bytes"] == found["saved_activations_bytes"] > 0
    assert sum(row["bytes"] for row in found["ops"].values()) == found["bytes"]
    # the engine's primitives are the op set's own names
    assert all(row["in_op_set"] for row in found["ops"].values()), found["ops"]


def test_reference_on_rnn_fanout_names_the_tanh_outputs():
    found, problem = measured("reference", "rnn_fanout")
    dims = workloads.get("rnn_fanout").SIZES["tiny"]
    tanh = found["ops"]["tanh"]
    # h_1 .. h_n, each (B, D) float32
    assert tanh["count"] == dims["n"]
    assert tanh["bytes"] == dims["n"] * dims["B"] * dims["D"] * 4


@pytest.mark.parametrize("name", [n for n in LISTS_OPS if n != "reference"])  # the reference: exactly, above
@pytest.mark.parametrize("workload", ["chained_dot", "rnn_fanout", "shared_linear", "unet"])
def test_op_lists_sum_to_the_saved_activations_figure(name, workload):
    found, _ = measured(name, workload)
    assert found["ops"], found["method"]
    saved = found["saved_activations_bytes"]
    assert saved > 0
    assert abs(found["bytes"] - saved) <= 0.01 * saved, (found["bytes"], saved)


@pytest.mark.parametrize("name", [n for n in LISTS_OPS if n != "reference"])
def test_lists_line_up_with_the_reference_engine_on_rnn_fanout(name):
    """Mapped to the op set's names, the tanh outputs every framework saves are the
    same op with the same bytes as the reference engine's."""
    reference, _ = measured("reference", "rnn_fanout")
    found, _ = measured(name, "rnn_fanout")
    assert found["ops"]["tanh"]["bytes"] == reference["ops"]["tanh"]["bytes"]
    assert found["ops"]["tanh"]["count"] == reference["ops"]["tanh"]["count"]
    assert found["ops"]["tanh"]["names"] != ["tanh"] or name == "jax"  # the framework's own name kept


def test_torch_names_the_nodes_that_read_each_buffer():
    """h_k = tanh(...) is read by its own backward (tanh' from the output) and by the
    next step's matmul (its input): the graph walk finds both."""
    found, _ = measured("torch", "rnn_fanout")
    assert found["ops"]["tanh"]["read_by"] == ["MmBackward0", "TanhBackward0"]


@pytest.mark.parametrize("name", NO_LIST)
def test_frameworks_without_a_way_say_why(name):
    found, _ = measured(name, "chained_dot")
    assert found["ops"] is None and found["bytes"] is None
    # the adapter's own reason, or (MLX, tinygrad: one lazy call) that there is no end of forward
    assert "no way to tell which op" in found["method"] or "no forward/backward split" in found["method"]


def test_op_names_map_to_the_op_set():
    assert saved_ops.op_name("MmBackward0") == "matmul"
    assert saved_ops.op_name("TanhBackward0") == "tanh"
    assert saved_ops.op_name("MatmulGradNode") == "matmul"
    assert saved_ops.op_name("dot_general") == "matmul"
    assert saved_ops.op_name("conv_general_dilated") == "conv2d"
    assert saved_ops.op_name("ConvolutionBackward0") == "conv2d"
    assert saved_ops.op_name("CompiledFunctionBackward") is None


def test_group_counts_each_buffer_once_under_its_first_op():
    rows = saved_ops.group([(1, 100, "TanhBackward0"), (1, 100, "MmBackward0"), (2, 50, "MmBackward0"),
                            (3, 7, "WeirdBackward0")])
    assert rows == {
        "tanh": {"bytes": 100, "count": 1, "names": ["TanhBackward0"], "in_op_set": True},
        "matmul": {"bytes": 50, "count": 1, "names": ["MmBackward0"], "in_op_set": True},
        "WeirdBackward0": {"bytes": 7, "count": 1, "names": ["WeirdBackward0"], "in_op_set": False},
    }


def test_tensorflow_tape_sums_the_fan_in_gradients_at_once():
    """rnn_fanout uses W in each of its n steps: the tape hands all n gradients of W
    (D x D float32 each) to one add_n."""
    found, _ = measured("tensorflow", "rnn_fanout")
    dims = workloads.get("rnn_fanout").SIZES["tiny"]
    largest = found["backward"]["aggregation"]["largest"]
    assert largest == {"count": dims["n"], "bytes": dims["n"] * dims["D"] * dims["D"] * 4}


def test_a_failing_hook_leaves_a_reason_not_a_failed_cell(monkeypatch):
    adapter = frameworks.get("reference")
    adapter.load("cpu", "eager")
    problem = workloads.build("chained_dot", "tiny", "float32")
    step = Step(adapter, problem.loss, adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs), "eager")

    def broken(*args):
        raise AttributeError("module 'jax._src.ad_checkpoint' has no attribute 'saved_residuals'")

    monkeypatch.setattr(adapter, "saved_by_op", broken)
    monkeypatch.setattr(adapter, "backward_detail", broken)
    found = saved_ops.measure(adapter, step)
    assert found["ops"] is None and "saved_by_op failed: AttributeError" in found["method"]
    assert "backward_detail failed" in found["backward"]["error"]
    assert found["saved_activations_bytes"] > 0  # the rest of the pass still counted
