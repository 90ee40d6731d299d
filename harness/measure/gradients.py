"""Gradients in a worker: `harness check`'s pass, and the gradient error every
comparison uses.

- ``relative_error(got, ref)``: ||got - ref|| / ||ref|| in float64, the one definition
  behind `harness check`'s "rel. error" column (harness/check.py) and a measured
  record's ``grad_rel_err`` (worker.py's memory pass).
- ``gradient_pass``: the worker's ``gradient`` job (``python -m harness.measure.worker``,
  started by harness/gradcheck.py as `harness run` starts its passes): the loss and the
  gradient of one cell, computed twice (the first call, compilation included, then the
  steady call whose arrays are kept), saved as ``job["out_path"]`` (.npz, keys
  ``loss`` and ``grad/<param>``) before the worker's result is written.

A cell with ``"upcast": true`` casts the problem's float arrays to float64 before
computing: the reference engine's float64 gradient at exactly the point a float32 cell
sees (the float32-rounded params), which is what that cell is compared with.
"""

import time

import numpy as np


def relative_error(got, ref):
    """||got - ref|| / ||ref|| in float64; the absolute error when ref is zero; NaN
    when got is not finite."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if not np.all(np.isfinite(got)):
        return float("nan")
    diff, scale = np.linalg.norm(got - ref), np.linalg.norm(ref)
    return float(diff / scale) if scale > 0 else float(diff)


def gradient_pass(job, marks):
    from harness import frameworks
    from harness.workloads import build

    cell = job["cell"]
    adapter = frameworks.get(cell["framework"])
    adapter.load(cell["device"], cell["mode"])
    marks.mark("loaded")
    problem = build(cell["workload"], cell["size"], cell["dtype"], seed=cell.get("seed", 0))
    params, inputs = problem.params, problem.inputs
    if cell.get("upcast"):
        params, inputs = _float64(params), _float64(inputs)
    step = adapter.value_and_grad(problem.loss, mode=cell["mode"])
    p, i = adapter.from_numpy(params, cell["device"]), adapter.from_numpy(inputs, cell["device"])
    marks.mark("first-call")
    start = time.perf_counter()
    adapter.sync(step(p, i))
    first = time.perf_counter() - start
    marks.mark("steady-call")
    start = time.perf_counter()
    loss, grads = adapter.sync(step(p, i))  # the steady state is what gets compared
    steady = time.perf_counter() - start
    loss, grads = adapter.to_numpy(loss), adapter.to_numpy(grads)
    arrays = {"loss": np.asarray(loss), **{f"grad/{k}": np.asarray(v) for k, v in grads.items()}}
    with open(job["out_path"], "wb") as handle:
        np.savez(handle, **arrays)
    return {"status": "ok", "path": job["out_path"], "first_s": first, "steady_s": steady}


def _float64(tree):
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in tree.items()}
