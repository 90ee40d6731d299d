"""The framework's own prediction of a step's memory, kept beside the measurement.

People size batches from a framework's prediction (JAX's ``memory_analysis()``,
torch's ``MemTracker`` under ``FakeTensorMode``, XLA's buffer assignment); gradmem
already measures the truth, so each record keeps the prediction beside it and the
report shows how far apart they are (docs/predicted.md).

The record's ``prediction`` is one of four states, never a bare 0:

- ``predicted``: ``bytes`` is the predicted figure that compares with the step peak
  (``compares_with`` says how it was derived), ``fields`` the predictor's own output;
- ``zero``: the predictor answered, but every figure was 0 (jax#18954 on GPU): no
  prediction, said as such;
- ``unsupported``: the framework has no predictor for this cell (``reason``);
- ``failed``: the predictor raised (``reason`` has the exception).

A record without the key (older records, or a pass run with ``predict`` off) has no
prediction taken: "missing" in the report.

It is taken once in the memory pass after every measured step, so it cannot disturb a
measured figure (tests/measure/test_prediction.py checks the step peak with and without).
"""

import time

from harness import figures
from harness.frameworks.base import NoPrediction

STATES = ("predicted", "zero", "unsupported", "failed")


def take(adapter, loss_fn, params, inputs, mode):
    """The record's ``prediction`` for this cell (see the module docstring)."""
    t0 = time.perf_counter()
    try:
        found = adapter.predict_step_memory(loss_fn, params, inputs, mode)
    except NoPrediction as why:
        return {"state": "unsupported", "reason": str(why)}
    except Exception as err:  # a predictor's failure is a finding, not a failed cell
        return {"state": "failed", "reason": f"{type(err).__name__}: {_first_line(err)}"}
    found = dict(found, seconds=round(time.perf_counter() - t0, 3))
    if not found.get("bytes"):
        return {
            **found,
            "state": "zero",
            "bytes": None,
            "reason": "the predictor answered with 0 bytes for the step: not a prediction",
        }
    return {"state": "predicted", "reason": None, **found}


def ratio(record):
    """predicted / measured step peak of an ok record with a prediction, else None.

    Every predictor here plans the gradient call (forward and backward), so the
    measured figure is the step peak of those phases: ``total`` without an optimizer
    update, else the highest of the non-update phases (each phase's peak is taken
    above the step's start, harness/measure/memory_meter.py)."""
    found = record.get("prediction") or {}
    if found.get("state") != "predicted" or record.get("status") != "ok":
        return None
    measured = measured_bytes(record)
    return found["bytes"] / measured if measured else None


def measured_bytes(record):
    """The measured step peak a prediction compares with (see `ratio`): the registry's,
    so a CUDA cell's prediction is set against its device allocator's figure."""
    return figures.measured_for_prediction(record)


def _first_line(err):
    text = str(err).strip().splitlines()
    return text[0][:300] if text else ""


def predictor(record):
    """(framework, mode, method) of a record's prediction: one predictor, as summarised."""
    found = record.get("prediction") or {}
    return record.get("framework"), record.get("mode"), found.get("method")


def summary(records):
    """Per predictor (framework, mode): cells compared, median and worst error
    (predicted / measured - 1, signed; worst by magnitude), and the cells whose
    prediction is of another program than the measured one, kept apart."""
    groups = {}
    for record in records:
        found = record.get("prediction") or {}
        value = ratio(record)
        if value is None:
            continue
        key = (record["framework"], record["mode"], found.get("same_program", True))
        groups.setdefault(key, []).append((value - 1.0, record))
    out = []
    for (framework, mode, same), errors in sorted(groups.items()):
        values = sorted(e for e, _ in errors)
        middle = len(values) // 2
        median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
        worst, worst_record = max(errors, key=lambda item: abs(item[0]))
        out.append({
            "framework": framework, "mode": mode, "same_program": same, "cells": len(values),
            "median_error": median, "worst_error": worst,
            "worst_cell": f"{worst_record.get('workload')} {worst_record.get('size')}",
            "method": (worst_record.get("prediction") or {}).get("method"),
        })
    return out
