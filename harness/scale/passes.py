"""Where `harness scale` runs its memory passes: the one place they are submitted.

`MemoryPasses.run(cells)` measures each cell's memory pass in a fresh worker and yields
``(cell, record)`` as each finishes. Nothing else runs: no time pass (the records carry
null times) and no reference gradient (`harness check` compares gradients; at a
batch the size does not have, it would cost a float64 pass per workload and batch).
The passes go through the sweep's executor interface (harness/sweep/executor.py),
one at a time: an executor that runs several at once or on a cluster (sweep/ray_executor.py)
replaces `LocalExecutor` here and nothing else.
"""

from harness.sweep.cell_runner import CellRunner, CellState
from harness.sweep.executor import LocalExecutor


class MemoryPasses:
    def __init__(self, workdir, options, progress=None):
        self.runner = CellRunner(workdir, options)
        self.progress = progress  # progress(cell, what) or None
        self.executor = LocalExecutor(workdir, slots=1, on_start=self._started)

    def _started(self, task):
        if self.progress and task.job.get("cell"):
            self.progress(task.job["cell"], "memory pass")

    def run(self, cells):
        """Yield (cell, record) for each cell of `cells`, in order."""
        for index, cell in enumerate(cells):
            state = self.runner.start(index, cell, memory_only=True)
            if not isinstance(state, CellState):  # unavailable here: decided without a worker
                yield cell, state
                continue
            self.executor.submit(self.runner.memory_task(state))
            [(_, outcome)] = list(self.executor.outcomes())  # a signal here kills the worker
            yield cell, self.runner.memory_record(state, outcome)
