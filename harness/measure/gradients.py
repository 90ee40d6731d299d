"""Gradients in a worker: `harness check`'s pass, and the gradient error every
comparison uses.

- ``relative_error(got, ref)``: ||got - ref|| / ||ref|| in float64, the one definition
  behind `harness check`'s "rel. error" column (harness/check/command.py) and a measured
  record's ``grad_rel_err`` (worker.py's memory pass).
- ``gradients_pass``: the worker's ``gradients`` job (``python -m harness.measure.worker``,
  started by harness/check/framework_runner.py through the sweep's worker machinery): one
  framework's cells in one process, each cell's loss and gradient computed twice (the
  first call, compilation included, then the steady call whose arrays are kept),
  saved as .npz (keys ``loss`` and ``grad/<param>``), then its result written
  atomically.

A cell with ``"upcast": true`` casts the problem's float arrays to float64 before
computing: the reference engine's float64 gradient at exactly the point a float32 cell
sees (the float32-rounded params), which is what that cell is compared with.
"""

import time
from typing import NamedTuple

import numpy as np

#: the one rule, read by `harness check`, a record's cross-check and the page: a gradient
#: agrees with the truth when its worst relative error is at most this for its dtype. A
#: float32 chain of products is exact to a few hundred ulps (2.5e-6 at worst over the
#: CPU grid's float32 cells); a relu unit within rounding of zero is a kink, not an error
#: (harness/measure/kinks.py); a VJP off by 1e-3 is caught
TOLERANCE = {"float64": 1e-8, "float32": 1e-4}
AGREES, AT_KINK, DISAGREES = "agrees", "agrees at a relu kink", "disagrees"


def tolerance(dtype):
    return TOLERANCE.get(dtype, TOLERANCE["float32"])


def verdict(error, dtype, kink=None):
    """AGREES, AT_KINK (`kink`: the comparison was made at a relu kink) or DISAGREES."""
    if error is None or not np.isfinite(error) or error > tolerance(dtype):
        return DISAGREES
    return AT_KINK if kink else AGREES


class Agreement(NamedTuple):
    error: float  # worst relative error over the parameters, against the truth the run took
    worst: str  # the parameter with it
    kink: dict | None  # {units, flipped, float64_side_error}: where the run took a kink's other side


def agreement(got, truth, dtype):
    """How `got` ({param: gradient}) agrees with `truth` (kinks.Truth): against the
    float64 truth, or where that is beyond the tolerance, against the truth with the relu
    units within rounding of zero on their other side (each candidate; the nearest)."""
    def worst(reference):
        errors = {k: relative_error(got[k], reference[k]) for k in reference if k in got}
        name = max(errors, key=lambda k: (np.isnan(errors[k]), errors[k]), default="")
        return errors.get(name, float("nan")), name

    error, name = worst(truth.grads)
    if verdict(error, dtype) == AGREES or not truth.candidates:
        return Agreement(error, name, None)
    nearest = min(((*worst(other), flipped) for flipped, other in truth.candidates), key=lambda c: c[0])
    if verdict(nearest[0], dtype) == DISAGREES:
        return Agreement(error, name, None)
    return Agreement(nearest[0], nearest[1], {"units": truth.units, "flipped": nearest[2],
                                              "float64_side_error": error})


def relative_error(got, ref):
    """||got - ref|| / ||ref|| in float64; the absolute error when ref is zero; NaN
    when got is not finite."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if not np.all(np.isfinite(got)):
        return float("nan")
    diff, scale = np.linalg.norm(got - ref), np.linalg.norm(ref)
    return float(diff / scale) if scale > 0 else float(diff)


def gradients_pass(job, marks):
    """The cells of `job["cells"]`, one after another in this process (one framework
    loaded once per mode): before each, the mark ``cell <id>`` (the parent's per-cell
    timeout counts from it, harness/check/framework_runner.py); after each, its arrays at the cell's
    ``out_path`` and its result (status, timings) written atomically at ``result_path``.
    An exception fails that cell alone (its status and message), never the others."""
    from harness import frameworks
    from harness.measure import failures
    from harness.results import write_json_atomic

    adapter = frameworks.get(job["framework"])
    loaded_mode = None
    for cell in job["cells"]:
        marks.mark(f"cell {cell['id']}")
        try:
            if cell["mode"] != loaded_mode:
                adapter.load(job["device"], cell["mode"])
                loaded_mode = cell["mode"]
            result = _compute(adapter, cell, job["device"])
        except Exception as err:  # noqa: BLE001 - reported in the table; the other cells go on
            result = failures.from_exception(err)
        write_json_atomic(cell["result_path"], result)
    return {"status": "ok", "cells": len(job["cells"])}


def _compute(adapter, cell, device):
    """One cell's loss and gradient, twice (the first call with its compilation, then
    the steady call whose arrays are kept), saved at ``cell["out_path"]``."""
    from harness.measure import kinks
    from harness.workloads import build

    problem = build(cell["workload"], cell["size"], cell["dtype"], seed=cell.get("seed", 0))
    params, inputs = problem.params, problem.inputs
    if cell.get("upcast"):
        params, inputs = _float64(params), _float64(inputs)
    step = adapter.value_and_grad(problem.loss, mode=cell["mode"])
    p, i = adapter.from_numpy(params, device), adapter.from_numpy(inputs, device)
    start = time.perf_counter()
    adapter.sync(step(p, i))
    first = time.perf_counter() - start
    start = time.perf_counter()
    loss, grads = adapter.sync(step(p, i))  # the steady state is what gets compared
    steady = time.perf_counter() - start
    kink = None
    if cell.get("upcast"):  # the truth: where a relu kink is near, its other side too
        _, _, kink = kinks.reference_with_kink(adapter, problem.loss, p, i)
        kink = kink and kink._replace(candidates=[(n, adapter.to_numpy(g)) for n, g in kink.candidates])
    with open(cell["out_path"], "wb") as handle:
        kinks.save_truth(handle, adapter.to_numpy(loss), adapter.to_numpy(grads), kink)
    return {"status": "ok", "path": cell["out_path"], "first_s": first, "steady_s": steady}


def _float64(tree):
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in tree.items()}
