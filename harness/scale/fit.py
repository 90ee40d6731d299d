"""Least-squares lines through (batch, bytes): fixed bytes, bytes per sample, R², the
largest residual; and the largest batch a line lets into a budget.

Pure arithmetic on numbers, no records: harness/scale/series.py feeds it.
"""

import math
from dataclasses import dataclass, replace

from harness.units import MIB


class FitError(ValueError):
    """A line that cannot be fitted or used; the message says why."""


class BudgetError(FitError):
    """A budget no batch fits in (below the fixed bytes, or below batch 1)."""


@dataclass(frozen=True)
class Line:
    """bytes = fixed + per_sample x batch, fitted to `points` by least squares."""

    fixed: float
    per_sample: float
    r2: float  # None when every point has the same bytes (nothing to explain)
    max_residual: float  # the largest |measured - fitted|, bytes
    points: tuple  # ((batch, bytes), ...) in batch order

    def at(self, batch):
        return self.fixed + self.per_sample * batch


def fit_line(points):
    """The least-squares Line through `points` [(batch, bytes), ...]; FitError with
    fewer than two distinct batches (a line needs two)."""
    points = tuple(sorted((int(b), float(y)) for b, y in points))
    batches = {b for b, _ in points}
    if len(batches) < 2:
        raise FitError(f"a line needs measurements at 2 or more distinct batches, got {sorted(batches) or 'none'}")
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sbb = sum((b - mean_b) ** 2 for b, _ in points)
    sby = sum((b - mean_b) * (y - mean_y) for b, y in points)
    per_sample = sby / sbb
    fixed = mean_y - per_sample * mean_b
    residuals = [y - (fixed + per_sample * b) for b, y in points]
    ss_res = sum(r * r for r in residuals)
    ss_tot = sum((y - mean_y) ** 2 for _, y in points)
    r2 = None if ss_tot == 0 else 1.0 - ss_res / ss_tot
    return Line(fixed, per_sample, r2, max(abs(r) for r in residuals), points)


def largest_batch(line, budget, what="the footprint", *, fixed_at_least_zero=True):
    """The largest batch b >= 1 with line.at(b) <= budget; FitError saying why there is
    none (the budget is below the fixed bytes, or below fixed + one sample, or the
    bytes do not grow with the batch).

    A fitted line's fixed bytes below zero are taken as zero: no step needs fewer than
    0 bytes, and such an intercept is the scatter of figures a few pages wide (a tiny
    size's footprint moves in 4 KiB pages), which would otherwise let a batch into a
    budget of a few bytes. `fixed_at_least_zero=False` keeps the intercept, for a line
    through two points near the budget (near_line), interpolated or extrapolated a little
    there, where the intercept is only the line's position."""
    if fixed_at_least_zero and line.fixed < 0:
        line = replace(line, fixed=0.0)
    if budget < line.fixed:
        raise BudgetError(
            f"the budget {_mib(budget)} is below the fixed bytes of {what} ({_mib(line.fixed)}): "
            f"no batch fits; give a budget above {_mib(line.fixed)}"
        )
    if line.per_sample <= 0:
        raise FitError(
            f"{what} does not grow with the batch (fitted {line.per_sample:+.0f} bytes per sample): "
            "no largest batch can be predicted; measure larger batches"
        )
    batch = math.floor((budget - line.fixed) / line.per_sample)
    if batch < 1:
        raise BudgetError(
            f"the budget {_mib(budget)} is below {what} at batch 1 ({_mib(line.at(1))}): no batch fits"
        )
    return batch


def near_line(points, budget):
    """The line through the two measured points (batch, bytes) that bracket `budget`
    most closely: the nearest at or below it and the nearest above it; when every
    point is on one side, the two nearest there. Used where a line fitted far from the
    budget has to be extrapolated: a line through points near the budget is only
    interpolated (or extrapolated a little). FitError with fewer than two batches."""
    by_batch = {}
    for batch, value in points:
        by_batch[int(batch)] = float(value)
    below = sorted((b for b, v in by_batch.items() if v <= budget), key=lambda b: budget - by_batch[b])
    above = sorted((b for b, v in by_batch.items() if v > budget), key=lambda b: by_batch[b] - budget)
    pair = below[:1] + above[:1] if below and above else (below or above)[:2]
    return fit_line([(b, by_batch[b]) for b in pair])


def _mib(value):
    return f"{value / MIB:.2f} MiB"
