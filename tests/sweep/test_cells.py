"""The sweep's matrix (variants expand only where they mean something) and its table."""

import argparse

import pytest

from harness import choices
from harness.sweep import cells, command as sweep, summary_table as table


def plan(**overrides):
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    args = parser.parse_args(["--out", "unused.jsonl"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return sweep.plan(args)


def test_orders_expand_on_the_reference_engine_only():
    todo = plan(workload="chained_dot", framework="reference,torch", order="heap,bfs,dfs")
    assert [(c["framework"], c["order"]) for c in todo] == [
        ("reference", "heap"), ("reference", "bfs"), ("reference", "dfs"), ("torch", None),
    ]


def test_remat_expands_on_segmented_workloads_only():
    todo = plan(framework="reference", remat="none,sqrt")
    segmented = [c["workload"] for c in todo if c["remat"] == "sqrt"]
    assert segmented and set(segmented) < set(c["workload"] for c in todo if c["remat"] == "none")
    assert "shared_linear" not in segmented


def test_remat_on_a_workload_without_segments_is_an_error_naming_those_with_them():
    with pytest.raises(choices.ChoiceError, match="shared_linear.*chained_dot"):
        plan(workload="shared_linear", remat="sqrt")


def test_a_bad_remat_or_order_names_the_valid_choices():
    with pytest.raises(choices.ChoiceError, match="sqrt"):
        plan(workload="chained_dot", remat="sqroot")
    with pytest.raises(choices.ChoiceError, match="heap"):
        plan(workload="chained_dot", order="random")


def test_a_framework_without_the_strategy_is_unavailable_with_its_offers():
    cell = plan(workload="chained_dot", framework="pytensor", remat="sqrt")[0]
    from harness import frameworks

    reason = cells.unavailable_reason(cell, frameworks.get("pytensor"))
    assert "sqrt" in reason and "none" in reason


def _record(framework, peak, **variant):
    cell = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": framework,
            "mode": "eager", "device": "cpu", "optimizer": None, "remat": "none", "order": None, **variant}
    return {**cell, "status": "ok", "peak_bytes": {"total": peak}, "first_step_peak_bytes": {"total": peak},
            "bound_bytes": peak, "time_s": {"total": 1.0}, "time_spread_s": {"total": 0.0}}


def test_the_table_shows_variants_and_divides_by_the_plain_reference():
    records = [
        _record("reference", 4 * 2**20, order="heap"),
        _record("reference", 2 * 2**20, order="heap", remat="sqrt"),
        _record("reference", 8 * 2**20, order="bfs"),
    ]
    text = table.format_table(records)
    assert "variant" in text.splitlines()[1]  # under the legend line
    sqrt_line = next(line for line in text.splitlines() if "remat=sqrt" in line)
    bfs_line = next(line for line in text.splitlines() if "order=bfs" in line)
    # mem x ref divides by the reference without remat in its default order (4 MiB)
    assert " 0.50 " in sqrt_line and " 2.00 " in bfs_line


def test_the_table_has_no_variant_column_without_variants():
    text = table.format_table([_record("reference", 2**20, order="heap")])
    assert "variant" not in text
