"""The op contract, the registries and the errors that name valid choices."""

import math
import pathlib

import pytest

from harness import frameworks, ops, workloads
from harness.choices import ChoiceError, parse_choices
from harness.frameworks import remat


def test_every_op_has_a_signature_starting_with_its_name():
    for name, (signature, meaning) in ops.OPS.items():
        assert signature.startswith(name + "("), name
        assert meaning


def test_the_docs_op_table_is_the_one_generated_from_ops():
    # docs/ops.md says the table is ops.contract_table(): an op added or reworded in
    # OPS and not regenerated into the page fails here
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    assert ops.contract_table() in page
    assert page.count("\n| `") == len(ops.OPS)


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


# ---- remat: the strategy names and the sqrt segmentation (harness/remat_strategies.py,
# which harness/frameworks/remat.py names for the adapters) and the plain ops ----
def test_parse_remat_reads_every_spelling():
    assert remat.parse_remat("none") == ("none", None)
    assert remat.parse_remat("native") == ("native", None)
    assert remat.parse_remat("native:reentrant") == ("native", "reentrant")
    assert remat.parse_remat("sqrt") == ("sqrt", None)
    assert remat.parse_remat("revolve:4") == ("revolve", 4)
    assert remat.parse_remat("articulation") == ("articulation", None)
    for text in ("native:reentrant", "revolve:4", "sqrt"):
        assert remat.format_remat(*remat.parse_remat(text)) == text


@pytest.mark.parametrize(
    "text, says",
    [
        ("turbo", "unknown remat 'turbo'"),
        ("", "unknown remat"),
        ("revolve", "snapshot count S >= 1"),
        ("revolve:0", "snapshot count S >= 1"),
        ("revolve:two", "snapshot count S >= 1"),
        ("sqrt:3", "takes no argument"),
        ("native:", "native variant must be a name"),
    ],
)
def test_malformed_remat_is_a_choice_error_naming_the_strategies(text, says):
    with pytest.raises(ChoiceError) as err:
        remat.parse_remat(text)
    assert says in str(err.value)
    assert "valid remats: none, native, native:<variant>, sqrt, revolve:S, articulation" in str(err.value)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 10, 16, 17, 50, 64, 100])
def test_sqrt_segments_cover_the_chain_in_ceil_sqrt_n_even_segments(n):
    segments = remat.sqrt_segments(n)
    assert len(segments) == math.ceil(math.sqrt(n))
    assert [i for start, stop in segments for i in range(start, stop)] == list(range(n))
    lengths = [stop - start for start, stop in segments]
    assert not lengths or max(lengths) - min(lengths) <= 1


def test_plain_and_segmented_chains_run_the_same_steps():
    steps = []

    def step(i, x, consts):
        steps.append(i)
        return x * consts["a"] + i

    plain = remat.chain(step, 1.0, 10, {"a": 2.0})
    calls = []
    wrap = lambda seg: (calls.append(seg.__name__), seg)[1]  # a "checkpoint" that only records
    assert remat.segmented_chain(step, 1.0, 10, {"a": 2.0}, wrap) == plain
    assert steps == list(range(10)) * 2
    assert calls == [f"chain_segment_{a}_{b}" for a, b in remat.sqrt_segments(10)]
    assert remat.checkpoint(lambda x, c: x + c["a"], 1.0, {"a": 2.0}) == 3.0


def test_flat_checkpoint_passes_dict_arrays_as_separate_arguments():
    seen = []

    def native(g, *flat):
        seen.append(flat)
        return g(*flat)

    checkpoint = remat.flat_checkpoint(native)
    out = checkpoint(lambda x, p, y: x + p["a"] * p["b"] - y, 1.0, {"a": 2.0, "b": 3.0}, 4.0)
    assert out == 3.0 and seen == [(1.0, 2.0, 3.0, 4.0)]
