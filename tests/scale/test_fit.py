"""The least-squares line, the largest batch under a budget, the batch list and the
auto series: checked on numbers whose answers are known."""

import numpy as np
import pytest

from harness.choices import ChoiceError
from harness.scale.batches import AUTO, AUTO_MAX_POINTS, next_auto_batch, parse_batches
from harness.scale.fit import BudgetError, FitError, fit_line, largest_batch
from harness.units import MIB


def test_an_exact_line_is_recovered():
    line = fit_line([(b, 40 * MIB + 3 * MIB * b) for b in (8, 1, 4, 2)])
    assert line.fixed == pytest.approx(40 * MIB) and line.per_sample == pytest.approx(3 * MIB)
    assert line.r2 == pytest.approx(1.0) and line.max_residual == pytest.approx(0, abs=1e-6)
    assert [b for b, _ in line.points] == [1, 2, 4, 8]


def test_a_noisy_line_matches_numpy_and_the_r2_definition():
    points = [(1, 10.0), (2, 12.0), (4, 15.0), (8, 26.0)]
    line = fit_line(points)
    slope, intercept = np.polyfit([b for b, _ in points], [y for _, y in points], 1)
    assert line.per_sample == pytest.approx(slope) and line.fixed == pytest.approx(intercept)
    y = np.array([y for _, y in points])
    fitted = intercept + slope * np.array([b for b, _ in points])
    assert line.r2 == pytest.approx(1 - np.sum((y - fitted) ** 2) / np.sum((y - y.mean()) ** 2))
    assert line.max_residual == pytest.approx(np.max(np.abs(y - fitted)))
    assert 0.9 < line.r2 < 0.99  # this made-up noise is visible in R²


def test_a_line_needs_two_distinct_batches():
    for points in ([], [(4, 1.0)], [(4, 1.0), (4, 2.0)]):
        with pytest.raises(FitError, match="2 or more distinct batches"):
            fit_line(points)
    assert fit_line([(1, 5.0), (2, 5.0)]).r2 is None  # flat: nothing to explain


def test_the_largest_batch_under_a_budget():
    line = fit_line([(1, 100 * MIB + 10 * MIB), (2, 100 * MIB + 20 * MIB)])
    assert largest_batch(line, 1024 * MIB) == 92  # 100 + 10 x 92 = 1020 <= 1024 < 1030
    assert largest_batch(line, 110 * MIB) == 1
    with pytest.raises(BudgetError, match=r"below the fixed bytes .*100\.00 MiB.*no batch fits"):
        largest_batch(line, 64 * MIB)
    with pytest.raises(BudgetError, match="below the footprint at batch 1"):
        largest_batch(line, 105 * MIB)
    flat = fit_line([(1, 100.0), (2, 90.0)])
    with pytest.raises(FitError, match="does not grow with the batch"):
        largest_batch(flat, 1000)


def test_a_fixed_bytes_below_zero_lets_no_batch_into_a_budget_of_a_byte():
    # A line of the shape a CI run fitted at tiny: the footprint at batch 2 read about 0
    # bytes (the step reused pages the process held), at batch 64 tens of KiB (here
    # 45000 bytes); an intercept below zero (here -1452 bytes), by which batch 2 "fit" a
    # budget of 1 byte. No step needs fewer than 0 bytes: taken as 0, no batch fits 1
    # byte, and 1 MiB holds what the per-sample bytes let in, not 2 batches more.
    line = fit_line([(2, 0.0), (64, 45000.0)])
    assert line.fixed == pytest.approx(-1451.6, abs=0.1)
    with pytest.raises(BudgetError, match="below the footprint at batch 1"):
        largest_batch(line, 1)
    assert largest_batch(line, MIB) == 1444  # 1 MiB / (45000 / 62 bytes) = 1444.7
    # A line through two points near the budget keeps its intercept: it is interpolated.
    assert largest_batch(line, 1, fixed_at_least_zero=False) == 2


def test_batch_lists():
    assert parse_batches("8,1, 2,4") == [1, 2, 4, 8]
    assert parse_batches(" auto ") == AUTO
    for text, says in [
        ("4", "2 or more batches"), ("", "2 or more batches"), ("0,1,2", "at least 1, got 0"),
        ("1,-2", "at least 1, got -2"), ("1,two", "'two' is not an integer"), ("2,2", "batch 2 is given twice"),
        ("1.5,2", "not an integer"),
    ]:
        with pytest.raises(ChoiceError, match=says):
            parse_batches(text)


def test_the_auto_series_doubles_until_the_cap():
    footprint = lambda b: 30 * MIB + 2 * MIB * b  # noqa: E731
    measured, cap = {}, 100 * MIB
    while (batch := next_auto_batch(measured, cap)) is not None:
        measured[batch] = footprint(batch)
    assert sorted(measured) == [1, 2, 4, 8, 16, 32]  # 30 + 2 x 32 = 94 <= 100 < 30 + 2 x 64
    assert max(measured.values()) <= cap


def test_the_auto_series_stops_at_a_failure_and_after_its_points():
    assert next_auto_batch({1: 10.0, 2: None}, 1e12) is None  # an oom ends it
    assert next_auto_batch({1: 10.0}, 5.0) == 2  # a line needs two points, whatever the cap
    assert next_auto_batch({1: 10.0, 2: 20.0}, 5.0) is None
    grown = {2**i: float(2**i) for i in range(AUTO_MAX_POINTS)}
    assert next_auto_batch(grown, 1e30) is None
