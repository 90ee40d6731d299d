"""Series of records at several batches: which records enter the fit, what the fit
says, and the verification verdict, on constructed records (scale_fixtures.py)."""

import pytest

from harness import workloads
from harness.scale import series as scale_series

from scale_fixtures import MIB, record


def test_the_fit_recovers_the_step_peak_and_footprint_lines():
    per_sample_bound = workloads.bound_per_sample("rnn_fanout", "small", "float32")
    made = [record(b, 20 * MIB, 1.04 * per_sample_bound, retained=3 * MIB, first_extra=4 * MIB,
                   traced=(MIB, per_sample_bound)) for b in (1, 2, 4, 8)]
    (fit,) = [scale_series.fit(s) for s in scale_series.group(made).values()]
    assert fit.ok and not fit.note and fit.bound_per_sample == per_sample_bound == 50 * 512 * 4
    assert fit.efficiency() == pytest.approx(1.04, abs=1e-5)
    assert fit.peak["forward"].per_sample == pytest.approx(0.52 * per_sample_bound, rel=1e-4)
    assert set(fit.peak) == {"forward", "backward", "total"}
    # the footprint: the first step's 20 + 4 MiB fixed (retained 0 then) beats the steady
    # state's 20 + 3 retained; with less first-step excess the steady one counts
    assert fit.footprint.fixed == pytest.approx(24 * MIB, abs=8)
    steady = [record(b, 20 * MIB, MIB, retained=3 * MIB, first_extra=MIB) for b in (1, 2)]
    assert scale_series.fit(next(iter(scale_series.group(steady).values()))).footprint.fixed == pytest.approx(23 * MIB)
    assert fit.footprint.per_sample == pytest.approx(fit.peak["total"].per_sample)
    assert fit.traced["total"].per_sample == pytest.approx(per_sample_bound)


def test_failed_batches_and_verification_records_stay_out_of_the_fit():
    made = [record(b, 20 * MIB, MIB) for b in (1, 2, 4)] + [record(8, 0, 0, status="oom")]
    check = record(900, 20 * MIB, 2 * MIB)  # far off the line: it must not pull it
    check["scale_check"] = {"budget_bytes": 2**30, "predicted_batch": 900, "factor": 1.0}
    (s,) = scale_series.group(made + [check]).values()
    fit = scale_series.fit(s)
    assert sorted(s.records) == [1, 2, 4, 8] and s.checks == [check]
    assert fit.peak["total"].per_sample == pytest.approx(MIB) and fit.peak["total"].r2 == pytest.approx(1.0)
    assert fit.kept_out == [(8, "oom", "made-up oom at batch 8")]
    assert "kept out of the fit: batch 8 oom" in fit.note


def test_the_newest_record_of_a_batch_wins_and_other_cells_are_other_series():
    made = [record(1, 0, MIB), record(2, 0, MIB), record(2, 0, 3 * MIB), record(1, 0, MIB, framework="torch")]
    groups = scale_series.group(made + [record(None, 0, MIB)])  # a sweep's record (no batch) is no point
    assert len(groups) == 2
    fits = {s.cell["framework"]: scale_series.fit(s) for s in groups.values()}
    assert fits["reference"].peak["total"].per_sample == pytest.approx(5 * MIB)  # (1, 1) and (2, 6)
    assert not fits["torch"].ok and "2 or more batches measured ok, got [1]" in fits["torch"].note


def test_no_fit_from_failed_passes_alone():
    fit = scale_series.fit(next(iter(scale_series.group([record(b, 0, 0, status="oom") for b in (1, 2)]).values())))
    assert not fit.ok and "got none" in fit.note and "batch 1 oom" in fit.note


def check(batch, fixed, per_sample, factor, status="ok"):
    r = record(batch, fixed, per_sample, status=status)
    r["scale_check"] = {"budget_bytes": 100 * MIB, "predicted_batch": 10, "factor": factor}
    return (factor, r)


def test_the_verdict():
    budget = 100 * MIB
    fits, over = check(10, 0, 9.9 * MIB, 1.0), check(13, 0, 9.9 * MIB, 1.25)
    assert scale_series.verdict([fits, over], budget) == "confirmed"
    assert scale_series.verdict([fits, check(13, 0, 0, 1.25, status="oom")], budget) == "confirmed"
    assert "1.25x fits too" in scale_series.verdict([fits, check(13, 0, 7 * MIB, 1.25)], budget)
    assert "the prediction does not fit" in scale_series.verdict([check(10, 0, 11 * MIB, 1.0), over], budget)
    assert "1.25x did not run" in scale_series.verdict([fits], budget)
