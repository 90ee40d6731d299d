"""Where `harness scale` runs its memory passes: the one place they are submitted.

`MemoryPasses.run(cells)` measures each cell's memory pass in a fresh worker and yields
``(cell, record)`` as each finishes. Nothing else runs: no time pass (the records carry
null times) and no reference gradient (`harness check` compares gradients; at a
batch the size does not have, it would cost a float64 pass per workload and batch).
Today the passes run one at a time through `CellRunner` (runner.run_worker); an
executor that runs several at once (issue 11), or on a cluster (issue 19), replaces
the body of `run` and nothing else.
"""

from harness.measure.cell import CellRunner


class MemoryPasses:
    def __init__(self, workdir, options, progress=None):
        self.runner = CellRunner(workdir, options)
        self.progress = progress  # progress(cell, what) or None

    def run(self, cells):
        """Yield (cell, record) for each cell of `cells`, in order."""
        for cell in cells:
            show = (lambda what, cell=cell: self.progress(cell, f"{what} pass")) if self.progress else None
            yield cell, self.runner.measure(cell, progress=show, memory_only=True)
