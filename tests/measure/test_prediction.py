"""The framework's own prediction of a step's memory, beside the measurement.

A prediction is taken in the memory pass after every measured step: present for JAX
compiled (XLA's memory_analysis) and torch eager (MemTracker under FakeTensorMode),
`unsupported` with a reason where a framework has none, and never inside a measured
window (the step peak is the same with and without it)."""

import pytest

from harness.frameworks.base import NoPrediction
from harness.frameworks.tensorflow import xla_allocations
from harness.measure import prediction
from harness.sweep import summary_table as table
from one_pass import memory_pass
from harness.report import predicted as predicted_section
from harness.units import MIB


@pytest.mark.parametrize("framework, mode", [("jax", "compiled"), ("torch", "eager")])
def test_a_prediction_is_present_and_near_the_measured_step_peak(framework, mode, tmp_path):
    result = memory_pass(framework, mode, tmp_path)
    found = result["prediction"]
    assert found["state"] == "predicted", found
    assert found["method"] and found["compares_with"] and found["fields"]
    # Any plan that computes x's gradient holds the 4 residuals (the bound) at once, so
    # a prediction of the step cannot be below it ...
    assert found["bytes"] >= result["bound_bytes"]
    # ... and both predictors count the same arrays the step allocates (residuals,
    # gradients, one temporary): measured on this cell, 0.96-1.0x of the step peak; a
    # prediction off by 2x would be a broken reading, not a predictor's error.
    record = {"status": "ok", "prediction": found, "peak_bytes": result["peak_bytes"]}
    assert 0.5 <= prediction.ratio(record) <= 2.0


def test_jax_eager_has_no_prediction_and_says_why(tmp_path):
    found = memory_pass("jax", "eager", tmp_path)["prediction"]
    assert found["state"] == "unsupported"
    assert "no plan" in found["reason"]


def test_the_prediction_is_taken_outside_the_measured_window(tmp_path):
    # The same cell measured with and without the prediction: its step peak is the
    # same within the RSS figure's repeatability (docs/measurement.md: 1 % or 256 KiB).
    with_it = memory_pass("torch", "eager", tmp_path, predict=True)
    without = memory_pass("torch", "eager", tmp_path, predict=False)
    assert without["prediction"] is None
    assert with_it["prediction"]["state"] == "predicted"
    a, b = with_it["peak_bytes"]["total"], without["peak_bytes"]["total"]
    assert abs(a - b) <= max(0.01 * b, 256 * 1024), (a, b)


def test_no_prediction_leaves_the_key_out_of_the_record(tmp_path):
    # `harness run --no-prediction`: nothing asked, so the record says none was taken
    # (null), not "unsupported"
    import json
    import subprocess
    import sys

    out = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-m", "harness", "run", "--framework", "reference", "--workload",
                    "chained_dot", "--size", "tiny", "--no-prediction", "--quiet", "--out", str(out)], check=True)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "ok" and record["prediction"] is None


def test_a_predictor_that_kills_the_worker_loses_no_measured_figure(tmp_path):
    # TensorFlow 2.17's XLA compile dies of SIGILL here: the pass writes what it
    # measured before predicting, so a crash there is a failed prediction, not a cell
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "r.jsonl"
    env = dict(os.environ, GRADMEM_TEST_PLANT="crash:prediction")  # os.abort() at the mark
    subprocess.run([sys.executable, "-m", "harness", "run", "--framework", "reference", "--workload",
                    "chained_dot", "--size", "tiny", "--quiet", "--out", str(out)], check=True, env=env)
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "ok" and record["peak_bytes"]["total"] >= 0 and record["time_s"]
    assert record["prediction"]["state"] == "failed" and "died" in record["prediction"]["reason"]


# ---- the states, without a framework ------------------------------------------------
class _Adapter:
    def __init__(self, answer):
        self.answer = answer

    def predict_step_memory(self, loss_fn, params, inputs, mode):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_missing_zero_unsupported_and_failed_are_distinct_states():
    assert prediction.take(_Adapter(NoPrediction("none here")), None, {}, {}, "eager") == {
        "state": "unsupported", "reason": "none here"}
    failed = prediction.take(_Adapter(ValueError("bad\nmore")), None, {}, {}, "eager")
    assert failed == {"state": "failed", "reason": "ValueError: bad"}
    zero = prediction.take(_Adapter({"method": "m", "bytes": 0, "fields": {"temp": 0}}), None, {}, {}, "eager")
    assert zero["state"] == "zero" and zero["bytes"] is None and zero["fields"] == {"temp": 0}
    ok = prediction.take(_Adapter({"method": "m", "bytes": 5 * MIB}), None, {}, {}, "eager")
    assert ok["state"] == "predicted" and ok["bytes"] == 5 * MIB
    for state in (None, unsupported := {"state": "unsupported"}, zero, failed):
        assert prediction.ratio({"status": "ok", "prediction": state, "peak_bytes": {"total": 1}}) is None
    assert unsupported


def test_the_ratio_compares_with_the_gradient_phases_when_an_optimizer_step_follows():
    found = {"state": "predicted", "bytes": 6 * MIB}
    joint = {"status": "ok", "prediction": found, "peak_bytes": {"gradient": 4 * MIB, "total": 4 * MIB}}
    assert prediction.ratio(joint) == 1.5
    split = {"status": "ok", "prediction": found,
             "peak_bytes": {"forward": 2 * MIB, "backward": 3 * MIB, "step": 8 * MIB, "total": 8 * MIB}}
    assert prediction.ratio(split) == 2.0  # the update's phase is not what was predicted


XLA_DUMP = """BufferAssignment:
allocation 0: size 1000000, maybe-live-out:
 value: <111 MatMul.104 @0> (size=1000000,offset=0): f32[500,500]{1,0}
allocation 1: size 1000000, parameter 0, shape |f32[500,500]| at ShapeIndex {}:
 value: <109 arg0.1 @0> (size=1000000,offset=0): f32[500,500]{1,0}
allocation 2: size 16, output shape is |(f32[], f32[500,500])|, maybe-live-out:
allocation 3: size 8, constant:
allocation 9: size 53000000, preallocated-temp:
 value: <5 x @0> (size=4,offset=0): f32[]
"""


def test_xla_buffer_assignment_is_read_by_kind():
    assert xla_allocations(XLA_DUMP) == {"output": 1000016, "parameter": 1000000, "constant": 8, "temp": 53000000}


def _record(framework, mode, state, nbytes=None, same=True, peak=4 * MIB):
    return {"workload": "w", "size": "tiny", "framework": framework, "mode": mode, "status": "ok",
            "peak_bytes": {"total": peak}, "retained_bytes": 0,
            "prediction": {"state": state, "bytes": nbytes, "same_program": same, "method": f"{framework}'s",
                           "reason": None if state == "predicted" else "why"}}


def test_summary_table_and_page_show_predicted_against_measured():
    records = [
        _record("jax", "compiled", "predicted", 5 * MIB),
        _record("jax", "compiled", "predicted", 3 * MIB),
        _record("jax", "compiled", "predicted", 4 * MIB),
        _record("tensorflow", "compiled", "predicted", 2 * MIB, same=False),
        _record("torch", "compiled", "unsupported"),
    ]
    rows = {(r["framework"], r["same_program"]): r for r in prediction.summary(records)}
    assert rows["jax", True]["cells"] == 3
    assert rows["jax", True]["median_error"] == 0.0 and rows["jax", True]["worst_error"] == 0.25
    assert rows["tensorflow", False]["median_error"] == -0.5  # kept apart: another program
    assert ("torch", True) not in rows  # nothing predicted, nothing summarised
    text = table.format_table(records)
    assert "pred/peak" in text and "1.25" in text and "0.50*" in text
    html = predicted_section.render(records)
    assert "+25.0%" in html and "another program" in html and "unsupported" in html
