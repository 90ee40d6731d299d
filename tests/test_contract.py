"""The op contract, the registries and the errors that name valid choices."""

import pytest

from harness import frameworks, ops, workloads
from harness.choices import ChoiceError, parse_choices


def test_every_op_has_a_signature_starting_with_its_name():
    for name, (signature, meaning) in ops.OPS.items():
        assert signature.startswith(name + "("), name
        assert meaning


def test_missing_ops_names_what_a_namespace_lacks():
    class Partial:
        add = staticmethod(lambda x, y: x + y)

    missing = ops.missing_ops(Partial)
    assert "add" not in missing and "matmul" in missing
    assert len(missing) == len(ops.OPS) - 1


@pytest.mark.parametrize(
    "call, kind",
    [
        (lambda: workloads.get("resnet"), "workload"),
        (lambda: frameworks.get("mxnet"), "framework"),
        (lambda: workloads.build("chained_dot", "huge", "float32"), "size"),
        (lambda: workloads.build("chained_dot", "tiny", "int8"), "dtype"),
        (lambda: parse_choices("device", "cpu,tpu", ("cpu", "cuda")), "device"),
    ],
)
def test_unknown_names_list_the_valid_choices(call, kind):
    with pytest.raises(ChoiceError) as err:
        call()
    assert f"unknown {kind}" in str(err.value)
    assert "valid" in str(err.value)


def test_parse_choices_all_and_lists():
    assert parse_choices("size", "all", ("tiny", "small")) == ["tiny", "small"]
    assert parse_choices("size", "small, tiny", ("tiny", "small")) == ["small", "tiny"]
