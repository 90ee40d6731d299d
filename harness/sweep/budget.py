"""`harness run --budget SECONDS`: a sweep sized to the time it has.

A GPU is rented by the quarter hour: a sweep that cannot finish is worth only the
cells it finished, so with a budget

1. the cells run in the order that gives the most comparison first (`order`): every
   workload at the smallest size in every framework's row, eager, then compiled, then
   the next size; within that, workload by workload (all frameworks of a workload next
   to each other), as `plan.expand` makes them;
2. the sweep prints, at its start, what it expects to fit (`Estimate`), from a cost per
   cell (`CostTable`): the worker wall time of the memory and the time pass of cells
   of the same device, framework, mode and size, learned from records (the --out
   file's own, e.g. on --resume, or --costs FILE), else the built-in table of recorded
   CUDA cells (`RECORDED_CUDA`), else a conservative default;
3. a cell is started only if it is expected to end before the budget (`Budget.fits`),
   counting the time passes already queued ahead of it (they measure one at a time):
   a cell that would fit once those are done waits for them (the parallel schedule),
   one that would not fit even alone is left for `--resume`, and a cheaper one after
   it may still start;
4. the endgame (the parallel schedule): once the time left is what the time passes
   of the cells whose memory pass has ended need to measure (`Budget.endgame`, with
   `RESERVE_FACTOR`), the memory passes still working are stopped (their cells are
   left for `--resume`) so that those time passes measure before the budget, however
   much longer than its estimate a memory pass runs;
5. at the budget itself the executor kills what still runs (`BudgetSpent`): those
   cells get no record (their passes did not finish), every finished record is kept,
   and `--resume` measures the rest.

The costs are wall seconds of whole passes (start-up, imports, compiling, warm-up and
timed steps), which is what a budget spends; a sweep's own figures (the --out records'
`provenance.worker_wall_s`) replace the table's as soon as it has some.
"""

import statistics
import time
from dataclasses import dataclass

from harness import choices

#: Mean worker wall seconds (memory pass, time pass, the time pass's set-up: its
#: `provenance.load_s`) per cell of the CUDA records gradmem wrote on one NVIDIA H200
#: (its first three runs under results/gpu/, docs/gpu.md: torch 2.11.0+cu130, jax
#: 0.11.2, cupy 14.2.0, tinygrad 0.14.0; the timed part capped by --time-budget 1), plain
#: cells (no optimizer, no remat), status ok: the cell count behind each mean is its
#: last item. Made by ``tools/cuda_cost_table.py results/gpu/*/*.jsonl`` (the mean, not
#: the median: a sweep's time is the sum of its cells'; `walls` leaves out the budget
#: run's cuda.jsonl, whose time walls count waits at the gate). The memory
#: walls mix passes run alone and side by side (8 side by side took 1.7x as long:
#: JAX compiled chained_dot 46.2 s and tiny_nerf 94.7 s against 27.9 s and 54.5 s
#: alone). Framework/mode/size pairs absent here are estimated from the nearest entry
#: (`CostTable.cost`).
RECORDED_CUDA = {
    ("jax", "compiled", "small"): (29.17, 7.75, 1.31, 4),
    ("jax", "eager", "paper"): (15.69, 13.73, 1.90, 1),
    ("jax", "eager", "small"): (17.88, 17.30, 1.91, 2),
    ("reference", "eager", "paper"): (5.23, 2.69, 1.02, 9),
    ("reference", "eager", "small"): (3.95, 4.94, 0.62, 10),
    ("tinygrad", "compiled", "small"): (16.32, 10.02, 2.49, 9),
    ("tinygrad", "eager", "small"): (6.19, 4.02, 0.91, 2),
    ("torch", "compiled", "small"): (33.76, 22.90, 12.46, 8),
    ("torch", "eager", "paper"): (5.54, 2.87, 1.04, 9),
    ("torch", "eager", "small"): (7.31, 2.68, 0.47, 8),
}
RECORDED_CUDA_SOURCE = "recorded CUDA cells (NVIDIA H200: harness/sweep/budget.py RECORDED_CUDA)"
LEARNED_SOURCE = "records of this sweep, its --out or --costs"
OTHER_SIZE_SOURCE = "the same framework and mode at another size (x1.5 from a smaller one)"

#: a cell nothing is known about: as long as the slowest recorded CUDA cell (JAX eager
#: tiny_nerf small, 25.7 s + 23.9 s), so an unknown cell is not started on a hope
DEFAULT_COST = (26.0, 24.0, 2.0)
#: a framework/mode known at one size only: the larger size costs this much more
#: (recorded CUDA cells: paper/small 0.8-1.1 for torch, the reference and JAX eager,
#: whose walls are start-up and compiling more than arithmetic; 1.5 leaves room)
LARGER_SIZE_FACTOR = 1.5
#: the reference gradient of a (workload, size, dtype), once per sweep (the reference
#: engine on the CPU in float64, 2 threads): on the H200's 16-CPU host under 1 s at
#: small and 4 s for tiny_nerf paper (the gaps between its records' timestamps); on a
#: loaded 2-CPU machine 2-12 s at small and 32-312 s at paper (seq2seq_attention)
REFERENCE_GRADIENT_S = {"tiny": 1.0, "small": 2.0, "paper": 15.0}
#: what starting, reading and recording a pass costs beyond its worker's own wall time
#: (the H200 run: 160 s of sweep for 150 s of worker walls over 10 cells and 2 gradients)
PASS_OVERHEAD_S = 0.5
#: the endgame reserves this many times the expected measured part of each submitted
#: time pass (the H200's torch compiled time passes measured 3.4-26 s, compiling in
#: their first step, where the table of the run before said 0.9 s: an estimate that
#: is short by less than this still has every waiting cell recorded)
RESERVE_FACTOR = 2.0
#: and at least this much per time pass (its start, release and record)
RESERVE_FLOOR_S = 3.0

SIZE_RANK = {size: rank for rank, size in enumerate(choices.SIZES)}
MODE_RANK = {"eager": 0, "compiled": 1}


def check(seconds):
    """A ChoiceError unless `seconds` is a usable budget."""
    if not seconds > 0:
        raise choices.ChoiceError(f"--budget {seconds:g}: must be a positive number of seconds")


class BudgetSpent(Exception):
    """The sweep's budget ran out while passes ran (the executor killed them)."""


def order(todo):
    """The cells of `todo` in the order that gives the most comparison first: by size
    (smallest first), then mode (eager first), keeping `plan.expand`'s order (device,
    workload, framework, variant) within each."""
    ranked = sorted(
        enumerate(todo),
        key=lambda item: (SIZE_RANK.get(item[1]["size"], 99), MODE_RANK.get(item[1]["mode"], 99), item[0]),
    )
    return [cell for _, cell in ranked]


def group(cell):
    return f"{cell['size']} {cell['mode']}"


def walls(record):
    """(memory s, time s, time set-up s) of a record's passes, or None (no wall
    recorded). The set-up is the time pass's `load_s` (import, configuration, runtime
    warm-up), which runs beside other passes; the rest of it measures alone. The time
    pass's wait at its gate (`gate_wait_s`: for the passes ahead of it, not its own
    need) is left out. A record from before it was kept whose memory pass ran beside
    others (so its time pass may have waited, up to 85 s on the H200) has no usable
    time wall: None."""
    prov = record.get("provenance") or {}
    measured = prov.get("worker_wall_s") or {}
    if measured.get("memory") is None or measured.get("time") is None:
        return None
    shared = (prov.get("cuda_concurrency") or {}).get("memory_pass") == "beside other passes"
    if shared and prov.get("gate_wait_s") is None:
        return None
    waited = ((prov.get("gate_wait_s") or {}).get("time")) or 0.0
    time_s = max(0.0, float(measured["time"]) - float(waited))
    setup = ((prov.get("load_s") or {}).get("time")) or 0.0
    return float(measured["memory"]), time_s, min(float(setup), time_s)


def learn(records):
    """{(device, framework, mode, size): (memory s, time s, time set-up s, cells)}: the
    mean walls of the plain ok records (no optimizer, no remat) among `records`."""
    found = {}
    for record in records:
        measured = walls(record)
        if record.get("status") != "ok" or measured is None:
            continue
        if record.get("optimizer") or (record.get("remat") or "none") != "none":
            continue
        key = (record.get("device"), record.get("framework"), record.get("mode"), record.get("size"))
        found.setdefault(key, []).append(measured)
    return {key: tuple(statistics.fmean(column) for column in zip(*rows)) + (len(rows),) for key, rows in found.items()}


@dataclass(frozen=True)
class Cost:
    memory_s: float  # the memory pass's wall (it may share the machine)
    time_s: float  # the time pass's wall ...
    setup_s: float  # ... of which its set-up, which may share the machine
    source: str  # where the figure comes from (printed with the estimate)

    @property
    def total_s(self):
        return self.memory_s + self.time_s

    @property
    def alone_s(self):
        """What of the cell measures with the machine to itself: its time pass after set-up."""
        return self.time_s - self.setup_s

    def scaled(self, factor, source):
        return Cost(self.memory_s * factor, self.time_s * factor, self.setup_s * factor, source)


class CostTable:
    """The expected worker walls of a cell: learned from records first, then the
    recorded CUDA table, then the same framework and mode at another size, then the
    mean of the other frameworks at that device/mode/size, then DEFAULT_COST."""

    def __init__(self, learned=None, recorded=None):
        self.learned = dict(learned or {})
        self.seen = []  # records added during the sweep (`add`)
        self.recorded = {("cuda",) + key: value for key, value in (RECORDED_CUDA if recorded is None else recorded).items()}

    def add(self, record):
        """A record this sweep finished: from now on, cells of its device, framework,
        mode and size are costed by the mean of this sweep's own records of them."""
        if walls(record) is None:
            return
        self.seen.append(record)
        key = (record.get("device"), record.get("framework"), record.get("mode"), record.get("size"))
        mine = learn([r for r in self.seen if (r.get("device"), r.get("framework"), r.get("mode"), r.get("size")) == key])
        if key in mine:
            self.learned[key] = mine[key]

    def _known(self, key):
        if key in self.learned:
            return Cost(*self.learned[key][:3], LEARNED_SOURCE)
        if key in self.recorded:
            return Cost(*self.recorded[key][:3], RECORDED_CUDA_SOURCE)
        return None

    def cost(self, cell):
        device, framework, mode, size = cell["device"], cell["framework"], cell["mode"], cell["size"]
        found = self._known((device, framework, mode, size))
        if found is not None:
            return found
        for other in sorted(SIZE_RANK, key=lambda s: abs(SIZE_RANK[s] - SIZE_RANK.get(size, 0))):
            near = self._known((device, framework, mode, other)) if other != size else None
            if near is not None:
                factor = LARGER_SIZE_FACTOR if SIZE_RANK.get(size, 0) > SIZE_RANK[other] else 1.0
                return near.scaled(factor, OTHER_SIZE_SOURCE)
        peers = [c for k in set(self.learned) | set(self.recorded) if k[0] == device and k[2:] == (mode, size)
                 for c in [self._known(k)]]
        if peers:
            slowest = max(peers, key=lambda c: c.total_s)
            return Cost(slowest.memory_s, slowest.time_s, slowest.setup_s,
                        "the slowest other framework at that device, mode and size")
        return Cost(*DEFAULT_COST, "a default (nothing recorded alike)")


class Budget:
    """The sweep's clock: `admit(cell, ...)` says whether a cell may start now."""

    def __init__(self, seconds, costs, jobs=1, started=None, clock=time.monotonic, report=None):
        check(seconds)
        self.seconds, self.costs, self.jobs, self.clock = float(seconds), costs, max(1, jobs), clock
        self.report = report or (lambda line: None)  # where the estimate's lines go
        self.estimate = None
        self.started = clock() if started is None else started
        self.deadline = self.started + self.seconds
        self.references = set()  # (workload, size, dtype) whose reference gradient is counted
        self.left_out = []  # cells not started: not expected to finish in time
        self.begun = []  # the cells started (`start`), in order
        self.stopped = []  # begun cells whose memory pass the endgame stopped

    def plan(self, runnable, unavailable=0):
        """Print what is expected to fit of the cells that will run (`runnable`)."""
        self.estimate = Estimate(runnable, self.costs, max(0.0, self.remaining()), self.jobs)
        for line in self.estimate.lines():
            self.report(line)
        if unavailable:
            self.report(f"  and {unavailable} cell(s) unavailable here (recorded at once, at no cost)")

    def remaining(self):
        return self.deadline - self.clock()

    def expected_s(self, cell, queued_time_s=0.0):
        """Seconds from now until `cell` would end if started now: its reference gradient
        (first cell of its workload), its memory pass, the time passes queued ahead of
        it (they measure one at a time) and its own time pass."""
        cost = self.costs.cost(cell)
        reference = 0.0
        if (cell["workload"], cell["size"], cell["dtype"]) not in self.references:
            reference = REFERENCE_GRADIENT_S.get(cell["size"], 10.0) + PASS_OVERHEAD_S
        return reference + cost.memory_s + queued_time_s + cost.time_s + 2 * PASS_OVERHEAD_S

    def fits(self, cell, queued_time_s=0.0):
        """Whether `cell`, started now, is expected to end before the deadline."""
        return self.expected_s(cell, queued_time_s) <= self.remaining()

    def start(self, cell):
        """`cell` starts: its reference gradient is counted from now on."""
        self.references.add((cell["workload"], cell["size"], cell["dtype"]))
        self.begun.append(cell)

    def reserve_s(self, waiting):
        """Seconds the time passes of the cells `waiting` (their memory pass ended) need
        to measure one after another, with the margin of RESERVE_FACTOR."""
        return sum(max(RESERVE_FACTOR * self.costs.cost(cell).alone_s, RESERVE_FLOOR_S) + 2 * PASS_OVERHEAD_S
                   for cell in waiting)

    def endgame(self, waiting):
        """Whether the time left is no more than what the time passes of `waiting` need:
        from then on nothing but them should run."""
        return bool(waiting) and self.remaining() <= self.reserve_s(waiting)

    def stop(self, cell):
        """`cell`'s memory pass was stopped in the endgame: it is left for --resume."""
        self.stopped.append(cell)

    def leave_out(self, cell):
        """`cell` will not start in this sweep: it is left for --resume."""
        self.left_out.append(cell)

    def admit(self, cell, queued_time_s=0.0):
        """True (and the cell started) if `cell` is expected to end before the deadline;
        else False, and the cell is left out."""
        if self.fits(cell, queued_time_s):
            self.start(cell)
            return True
        self.leave_out(cell)
        return False


class Estimate:
    """What is expected to fit in a budget, cell by cell in the sweep's order.

    Serial (jobs 1): cells one after another. With memory passes `jobs` at a time and
    time passes alone, each cell is charged its time pass's measuring part plus 1/jobs
    of its memory pass, its time pass's set-up and its reference gradient (those share
    the machine; the time passes measure alone, so their measuring parts add up)."""

    def __init__(self, todo, costs, seconds, jobs=1):
        self.rows = []  # (cell, cost, charged s, cumulative s, fits)
        spent, seen = 0.0, set()
        for cell in todo:
            cost = costs.cost(cell)
            if jobs == 1:
                share = cost.total_s + PASS_OVERHEAD_S * 2
            else:
                share = (cost.memory_s + cost.setup_s) / jobs + cost.alone_s + PASS_OVERHEAD_S * 2
            reference = (cell["workload"], cell["size"], cell["dtype"])
            if reference not in seen:
                seen.add(reference)
                share += (REFERENCE_GRADIENT_S.get(cell["size"], 10.0) + PASS_OVERHEAD_S) / jobs
            fits = spent + share <= seconds
            if fits:
                spent += share
            self.rows.append((cell, cost, share, spent, fits))
        self.seconds, self.jobs, self.spent = seconds, jobs, spent
        self.total_s = sum(row[2] for row in self.rows)

    def fitting(self):
        return [row[0] for row in self.rows if row[4]]

    def lines(self):
        """The estimate, as printed at the sweep's start: a line per size and mode."""
        groups = {}
        for cell, _, share, _, fits in self.rows:
            entry = groups.setdefault(group(cell), [0, 0, 0.0])
            entry[0] += 1
            entry[1] += fits
            entry[2] += share
        how = "serial" if self.jobs == 1 else f"memory passes {self.jobs} at a time, time passes alone"
        out = [
            f"budget {self.seconds:.0f} s: expected to fit {len(self.fitting())} of {len(self.rows)} cells "
            f"(~{self.spent:.0f} s; the whole plan ~{self.total_s:.0f} s; {how})"
        ]
        for name, (count, fit, seconds) in groups.items():
            out.append(f"  {name}: {fit} of {count} cells (~{seconds:.0f} s for all)")
        sources = {}
        for row in self.rows:
            sources[row[1].source] = sources.get(row[1].source, 0) + 1
        out.append("  costs from: " + "; ".join(f"{source} ({count} cells)" for source, count in sources.items()))
        return out
