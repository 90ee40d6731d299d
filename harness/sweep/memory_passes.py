"""Memory passes alone, each record handed back as it is measured: the one runner of them.

`harness scale` (a cell at batch after batch, the next batch chosen from the records so
far) and the releases' side-by-side confirmation (two releases' cells interleaved, a
pair at a time) measure memory passes only, and want each record before they choose
the next cell. `MemoryPasses(options, reference=...)` gives them that:
`run(cells)` yields ``(cell, record)`` as each pass ends, one at a time, each in a fresh
worker forked as the sweep forks its workers (sweep/executor.py), its record what the
sweep's cell runner makes of the memory pass (cell_runner.memory_record: null times).

- ``reference=True`` (the confirmation): each workload's reference gradient first, as
  in the sweep, so the gradient check runs inside the memory pass (between the first
  step and the steady ones) and what it leaves on the heap is in the retained figure,
  as in the sweep's records the confirmation measures again;
- ``reference=False`` (scale): no reference gradient (`harness check` compares
  gradients; at a batch the size does not have it would cost a float64 pass per
  workload and batch); the records say so (cell_runner.MEMORY_ONLY).

It owns a scratch directory and the executor's zygotes until `close()` (or the end of
a ``with`` block); a signal while a pass runs kills its worker (interrupts.py). The
whole sweep, every pass of every cell with its records appended to a file, is
api.run.
"""

import shutil
import tempfile

from harness import interrupts
from harness.sweep.cell_runner import CellRunner, CellState
from harness.sweep.executor import LocalExecutor


class MemoryPasses:
    def __init__(self, options, reference=True, progress=None):
        self.reference = reference
        self.progress = progress  # progress(cell, what) or None
        with interrupts.deferred():  # no signal between making the directory and owning it
            self.workdir = tempfile.mkdtemp(prefix="gradmem-memory-")
        self.runner = CellRunner(self.workdir, options)
        self.executor = LocalExecutor(self.workdir, slots=1, on_start=self._started)
        self.count = 0

    def _started(self, task):
        if self.progress and task.job.get("cell"):
            self.progress(task.job["cell"], task.job.get("kind", "").replace("_", " ") + " pass")

    def _one(self, task):
        self.executor.submit(task)
        [(_, outcome)] = list(self.executor.outcomes())  # a signal here kills the worker
        return outcome

    def run(self, cells):
        """Yield (cell, record) for each cell of `cells`, in order."""
        for cell in cells:
            self.count += 1
            state = self.runner.start(self.count, cell, memory_only=not self.reference)
            if not isinstance(state, CellState):  # unavailable here: decided without a worker
                yield cell, state
                continue
            if self.reference:
                task = self.runner.reference_task(cell)  # once per workload
                if task is not None:
                    self.runner.reference_done(task, self._one(task))
            yield cell, self.runner.memory_record(state, self._one(self.runner.memory_task(state)))

    def close(self):
        """Kill what still runs, stop the zygotes, remove the scratch directory."""
        self.executor.cancel_all()
        self.executor.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
