"""`harness scale --verify`: a prediction the fit's line gets wrong is predicted again
from the points measured near the budget, and measured again. Constructed records
(scale_fixtures.py) from footprints that curve, so a line through batches 1-8 misses
at the budget; no worker runs."""

import argparse
import math

import pytest

from harness.scale import command
from harness.scale import series as scale_series
from harness.scale.fit import FitError, fit_line, near_line

from scale_fixtures import MIB, cell, record

BUDGET = 1024 * MIB


class Passes:
    """Stands in for MemoryPasses: each (cell, batch) 'measured' from `footprint`."""

    def __init__(self, footprint):
        self.footprint, self.batches = footprint, []

    def run(self, jobs):
        for job in jobs:
            self.batches.append(job["batch"])
            yield job, record(job["batch"], 0, 0, noise=self.footprint(job["batch"]), first_extra=64 * 1024)


def verify(tmp_path, footprint):
    args = argparse.Namespace(out=str(tmp_path / "s.jsonl"), seed=0, warmup=1, timeout=60.0, memory_limit=None,
                              resume=False, quiet=True, verify=True)
    scale = command.Scale(args, [cell()], [1, 2, 4, 8], BUDGET, BUDGET)
    scale.memory = Passes(footprint)
    scale._measure_series()
    predictions = scale._predict(scale._fits())
    scale._verify(predictions)
    return predictions[0], scale.memory.batches


CURVED = lambda b: 20 * MIB + 2 * MIB * b + 2 * MIB * b * b / 50_000  # noqa: E731
STEPPED = lambda b: 20 * MIB + 2 * MIB * b + (60 * MIB if b >= 4 else 0)  # noqa: E731


@pytest.mark.parametrize("footprint", [CURVED, STEPPED], ids=["curved", "stepped"])
def test_a_missed_prediction_is_refined_from_the_points_near_the_budget(tmp_path, footprint):
    # CURVED: 2 MiB a sample at batch 0, the slope growing by 0.2 % of it per 100
    # samples: the line through batches 1-8 predicts about 500, some per cent too many
    # (its footprint is over the budget). STEPPED: 60 MiB more from batch 4 on: the
    # 1-8 line's slope is 5x too steep, its prediction so low that 1.25x of it fits.
    prediction, measured = verify(tmp_path, footprint)
    true_largest = max(b for b in range(1, 2000) if footprint(b) <= BUDGET)
    first, last = prediction["rounds"][0], prediction["rounds"][-1]
    assert scale_series.verdict(first[1], BUDGET) != "confirmed"
    assert scale_series.verdict(last[1], BUDGET) == "confirmed" and len(prediction["rounds"]) == 2
    # the refined batch is the true largest one less the margin: the 64 KiB scatter of
    # the two passes it came from (32 samples of 2 MiB would be far more)
    assert true_largest - 2 <= prediction["batch"] <= true_largest
    assert measured == [1, 2, 4, 8, first[0], math.ceil(1.25 * first[0]), last[0], math.ceil(1.25 * last[0])]
    # the records say which round and prediction they check
    checks = [c for c in scale_series.group(scale_series_records(tmp_path)).popitem()[1].checks]
    assert [c["scale_check"]["round"] for c in checks] == [0, 0, 1, 1]
    assert [b for b, _ in scale_series.rounds(checks, BUDGET)] == [first[0], last[0]]


def scale_series_records(tmp_path):
    from harness import results

    return results.read_records(tmp_path / "s.jsonl")


def test_a_right_first_prediction_is_measured_once(tmp_path):
    prediction, measured = verify(tmp_path, lambda b: 20 * MIB + 2 * MIB * b)
    # the first step is 64 KiB above the steady one: 20 MiB + 64 KiB + 2 MiB x 501 <= 1 GiB
    assert len(prediction["rounds"]) == 1 and prediction["batch"] == 501
    assert scale_series.verdict(prediction["checks"], BUDGET) == "confirmed" and len(measured) == 6


def test_the_line_near_the_budget_brackets_it():
    points = [(1, 10.0), (2, 20.0), (8, 80.0), (10, 100.0), (12, 130.0), (20, 250.0)]
    assert [b for b, _ in near_line(points, 110).points] == [10, 12]  # 100 <= 110 < 130
    assert [b for b, _ in near_line(points, 400).points] == [12, 20]  # all below: the two nearest
    assert [b for b, _ in near_line(points, 5).points] == [1, 2]  # all above
    assert near_line(points, 110).at(11) == pytest.approx(115)
    with pytest.raises(FitError, match="2 or more distinct batches"):
        near_line([(4, 1.0)], 2.0)
    assert fit_line(points).per_sample != near_line(points, 110).per_sample


def test_the_scatter_of_a_pass():
    r = record(4, 0, 0, noise=100 * MIB, first_extra=3 * MIB)
    assert scale_series.spread_of(r) == 3 * MIB  # first step 103, steady 100 MiB
    r["steady_samples"] = [{"retained_bytes": 0, "retained_detail_bytes": {"anon": 0, "file": 0, "shmem": 0},
                            "peak_bytes": {"total": t * MIB}, "footprint_bytes": {"total": t * MIB}}
                           for t in (100, 104, 101)]
    assert scale_series.spread_of(r) == 4 * MIB


def test_after_the_last_round_the_prediction_is_the_batch_measured(tmp_path):
    # a footprint that bends up steeply from batch 300 (2 MiB + (b - 300)/10 MiB a
    # sample): every line through points below the bend misses, so the rounds run out;
    # the answer is then the last batch checked, not a prediction never measured
    bent = lambda b: 20 * MIB + 2 * MIB * b + MIB * max(0, b - 300) ** 2 / 20  # noqa: E731
    prediction, _ = verify(tmp_path, bent)
    last_batch, last_checks = prediction["rounds"][-1]
    assert len(prediction["rounds"]) == 1 + command.REFINE_ROUNDS
    assert scale_series.verdict(last_checks, BUDGET) != "confirmed"
    assert prediction["batch"] == last_batch == last_checks[0][1]["batch"]
