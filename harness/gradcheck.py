"""Gradients of workloads in one framework's workers: the parent's side of `harness check`.

``run_framework()`` computes each cell (workload, size, dtype, mode) as one pass of the
measurement worker (job kind ``gradient``: harness/measure/gradients.py), through the
machinery `harness run` uses for its passes: LocalExecutor (harness/sweep/executor.py)
starts the worker (forked from the framework's zygote, or spawned), enforces the
per-cell timeout, kills its process group, registers it with interrupts.py (a SIGTERM,
SIGHUP or Ctrl-C to `check` kills every worker), and its result is written atomically
by the worker (results.write_json_atomic). The worker's environment is
sweep/environment.py's, pass kind ``gradient``. The parent never imports a framework.

Why a process per cell: frameworks must not share a process (each configures threads,
allocators and global flags at import), and a cell that crashes or hangs must be a row
of the table, not the end of the check. A worker that dies without a result is
"crashed", one past the timeout "timeout", an exception in it "error".
"""

import os
from dataclasses import dataclass, field

import numpy as np

STATUSES = ("ok", "error", "crashed", "timeout", "unavailable")


@dataclass
class CellResult:
    """What one cell produced: a status of STATUSES; loss and grads (NumPy) when ok."""

    id: str
    status: str
    message: str = ""
    loss: object = None
    grads: dict = field(default_factory=dict)
    first_s: float = None  # first call: compilation + one gradient
    steady_s: float = None  # second call


def run_framework(framework, cells, out_dir, device="cpu", timeout_s=600.0, start="fork"):
    """Compute `cells` (dicts with id, workload, size, dtype, mode, seed, upcast) in
    `framework`'s workers, one after another; {id: CellResult}. `timeout_s` bounds
    each cell; `start`: "fork" (from a zygote) or "spawn" (a fresh interpreter)."""
    from harness import frameworks
    from harness.sweep.environment import worker_environment
    from harness.sweep.executor import LocalExecutor, Task

    env, _ = worker_environment(frameworks.get(framework), "gradient")
    workdir = os.path.join(out_dir, f"workers-{framework}")
    os.makedirs(workdir, exist_ok=True)
    executor = LocalExecutor(workdir, slots=1, start=start)
    try:
        for cell in cells:
            job = {"kind": "gradient", "cell": dict(cell, framework=framework, device=device),
                   "out_path": os.path.join(out_dir, cell["id"] + ".npz")}
            executor.submit(Task(job, env, name=cell["id"], timeout_s=timeout_s, tag=cell["id"]))
        return {task.tag: _result(task.tag, outcome) for task, outcome in executor.outcomes()}
    finally:
        executor.cancel_all()  # no worker outlives the check (nothing runs after a normal end)
        executor.close()


def _result(cell_id, outcome):
    if outcome.status == "ok":
        result = CellResult(cell_id, "ok", first_s=outcome.result["first_s"], steady_s=outcome.result["steady_s"])
        with np.load(outcome.result["path"]) as arrays:
            result.loss = arrays["loss"]
            result.grads = {k[len("grad/"):]: arrays[k] for k in arrays.files if k.startswith("grad/")}
        return result
    if outcome.status in ("unavailable", "timeout"):
        return CellResult(cell_id, outcome.status, outcome.message)
    # an exception in the worker is "error"; a worker that left no result died: "crashed"
    return CellResult(cell_id, "error" if outcome.result else "crashed", outcome.message)
