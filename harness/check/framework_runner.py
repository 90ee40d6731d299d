"""Gradients of workloads in one framework's worker: the parent's side of `harness check`.

``run_framework()`` computes a framework's cells (workload, size, dtype, mode) in one
worker process (job kind ``gradients``: harness/measure/gradients.py), started, timed
out and stopped by the sweep's machinery: WorkerProcess (harness/sweep/worker_process.py)
forks it from the framework's zygote (or spawns it), registers it with interrupts.py (a
SIGTERM, SIGHUP or Ctrl-C to `check` kills it), kills its process group at the timeout;
its environment is harness/sweep/environment.py's (pass kind ``gradient``), its
per-cell results are written atomically. The timeout is per cell: the worker marks
each cell as it starts it, and the clock restarts there. A worker that dies or times
out makes that cell "crashed" or "timeout", and the remaining cells go on in a fresh
worker. The parent never imports a framework.

Why one process per framework, and a fresh one after a failure: frameworks must not
share a process (each configures threads, allocators and global flags at import), a
cell that crashes or hangs must be a row of the table, not the end of the check, and
one process for all of a framework's cells keeps JAX's and PyTorch's per-process
caches warm (a worker per cell made a 24-cell check 2.2x slower: 37 s against 16 s).
"""

import json
import os
from dataclasses import dataclass, field

from harness.measure import kinks

@dataclass
class CellResult:
    """What one cell produced: status "ok", "error", "crashed", "timeout" or
    "unavailable"; loss and grads (NumPy) when ok."""

    id: str
    status: str
    message: str = ""
    loss: object = None
    grads: dict = field(default_factory=dict)
    truth: object = None  # the whole file as kinks.Truth: a truth cell's kink candidates
    first_s: float = None  # first call: compilation + one gradient
    steady_s: float = None  # second call


def run_framework(framework, cells, out_dir, device="cpu", timeout_s=600.0, start="fork"):
    """Compute `cells` (dicts with id, workload, size, dtype, mode, seed, upcast) in
    `framework`'s worker; {id: CellResult}. `timeout_s` bounds each cell; `start`:
    "fork" (from a zygote) or "spawn" (a fresh interpreter)."""
    from harness import frameworks
    from harness.sweep.environment import worker_environment
    from harness.sweep.zygote import ZygotePool

    env, _ = worker_environment(frameworks.get(framework), "gradient")
    workdir = os.path.join(out_dir, f"workers-{framework}")
    os.makedirs(workdir, exist_ok=True)
    zygotes = ZygotePool(workdir, start)
    results, pending = {}, list(cells)
    try:
        while pending:
            pending = _run_worker(framework, pending, device, timeout_s, env, workdir, zygotes, results)
    finally:
        zygotes.close()
    return results


def _run_worker(framework, cells, device, timeout_s, env, workdir, zygotes, results):
    """One worker over `cells`; fills `results`; the cells still to run (after a death)."""
    from harness.measure.marks import read_marks
    from harness.sweep.worker_process import WorkerProcess, wait

    paths = {c["id"]: os.path.join(workdir, c["id"]) for c in cells}
    job = {"kind": "gradients", "framework": framework, "device": device,
           "cells": [dict(c, out_path=paths[c["id"]] + ".npz", result_path=paths[c["id"]] + ".json") for c in cells]}
    worker = WorkerProcess(job, env, workdir, f"gradients-{framework}-{len(results)}", timeout_s, zygotes=zygotes)
    begun_so_far = [0]

    def restart_clock_per_cell(worker):  # the timeout is per cell
        begun = sum(1 for _, name in read_marks(worker.paths["marks"]) if name.startswith("cell "))
        if begun > begun_so_far[0]:
            begun_so_far[0] = begun
            worker.restart_clock()

    outcome = wait(worker, restart_clock_per_cell)
    started = [name[len("cell "):] for _, name in outcome.marks if name.startswith("cell ")]
    still = []
    for cell in cells:
        cell_id = cell["id"]
        if os.path.exists(paths[cell_id] + ".json"):
            results[cell_id] = _load(cell_id, paths[cell_id] + ".json")
        elif started and cell_id == started[-1]:  # the cell that was running when it ended
            status = "timeout" if outcome.status == "timeout" else "crashed"
            results[cell_id] = CellResult(cell_id, status, outcome.message)
        else:
            still.append(cell)
    if len(still) == len(cells):  # the worker ended before it began any cell
        for cell in still:
            results[cell["id"]] = CellResult(cell["id"], "crashed", f"the worker ended before this cell: {outcome.message}")
        still = []
    return still


def _load(cell_id, result_path):
    with open(result_path, encoding="utf-8") as handle:
        result = json.load(handle)
    if result["status"] != "ok":  # an exception in the worker: "error" (or "unavailable")
        status = result["status"] if result["status"] == "unavailable" else "error"
        return CellResult(cell_id, status, result.get("message", ""))
    loaded = CellResult(cell_id, "ok", first_s=result["first_s"], steady_s=result["steady_s"])
    loaded.truth = kinks.load_truth(result["path"])
    loaded.loss, loaded.grads = loaded.truth.loss, loaded.truth.grads
    return loaded
