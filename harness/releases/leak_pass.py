"""The growth per step of a release store whose records lack it: a leak-only pass.

Every memory pass ends with the leak phase (harness/measure/leak.py): the growth per
step (the registry's `leak`) and its verdict (flat, settles, grows, inconclusive). The
stores swept before that phase existed hold neither. `harness releases --framework F
--leak-pass` measures them: for each release x workload x mode the store holds (a cell
with an ok record, none of whose records carries the figure), `--repeats` memory
passes (2 by default: the detector's band needs two a side; their leak phase with
budgets of its own, BUDGETS_S), in the release's own environment
(harness/versions/envs.py: the one the sweep used, built again where the sweep pruned
it), each the sweep's memory pass after its workload's reference gradient
(harness/sweep/memory_passes.py), rounds one after another as the sweep's. Every record
is appended at once to FRAMEWORK.leak.jsonl, compacted like the store's and tagged with
its round, so a stopped pass goes on where it stopped.

The detector and the page read the growth per step alone from these records
(detect.GROWTH): their other figures were measured by a newer gradmem than the sweep's,
and beside the sweep's rounds a harness change would read as the release's.
"""

import time

from harness import figures, interrupts, results
from harness.frameworks.base import Unavailable
from harness.releases import detect, side_by_side, store
from harness.sweep import cells, resume
from harness.sweep.cell_runner import Options
from harness.sweep.memory_passes import MemoryPasses
from harness.versions import envs, index

#: rounds per cell: the fewest that give the detector its band (two a side)
DEFAULT_ROUNDS = 2
#: the leak phase's budgets (detect.GROWTH_BUDGETS_S: more than the sweep's share of a pass)
BUDGETS_S = detect.GROWTH_BUDGETS_S


def measured(record):
    """The record carries the growth per step (its memory pass ran the leak phase)."""
    return figures.value(record, detect.GROWTH) is not None


def plan(records, framework, workloads_=None, modes=None, first=None, last=None):
    """{release: [cell]} in release order: every (workload, mode) of the store's `records`
    with an ok record at that release and no record carrying the growth per step (a
    cell that failed at a release, or a release that was unavailable, has nothing to
    compare its growth with). --workload/--mode/--from/--to narrow it."""
    lo, hi = (index.parse(v) if v else None for v in (first, last))
    ok, done = {}, set()
    for record in records:
        release = detect.release_of(record)
        if release is None or record.get("status") != "ok":
            continue
        key = (release, record["workload"], record["mode"], record.get("size"), record.get("dtype"))
        ok[key] = record
        if measured(record):
            done.add(key)
    found = {}
    for key in sorted(set(ok) - done, key=lambda k: (index.sort_key(k[0]), k[1], k[2])):
        release, workload, mode, size, dtype = key
        if workloads_ and workload not in workloads_ or modes and mode not in modes:
            continue
        if lo is not None and index.parse(release) < lo or hi is not None and index.parse(release) > hi:
            continue
        [cell] = cells.expand([workload], [(framework, release)], [size], [dtype], ["cpu"], [mode])
        found.setdefault(release, []).append(cell)
    return found


def rounds_held(held, cell):
    """The rounds of `cell` the leak file holds (an `unavailable` one is measured again: the
    release's environment could not be built then)."""
    return {r.get(store.ROUND_KEY) for r in held
            if resume.key(r) == resume.key(cell) and r.get("status") != "unavailable"}


class LeakPass:
    def __init__(self, out, adapter, rounds=DEFAULT_ROUNDS, timeout_s=600.0, keep_envs=False, torch_index=None,
                 measure=None, say=print, budgets_s=BUDGETS_S):
        self.out, self.adapter, self.rounds, self.budgets_s = out, adapter, rounds, budgets_s
        self.timeout_s, self.keep_envs, self.torch_index, self.say = timeout_s, keep_envs, torch_index, say
        self.measure = measure  # measure(cells) -> (cell, record) pairs; None: MemoryPasses
        self.passes = None
        self.path = store.leak_path(out, adapter.name)

    def run(self, planned):
        """Measure the rounds `planned` (plan()) lacks, release by release; returns how
        many passes were measured. One run at a time measures a store's leak file."""
        count = 0
        with side_by_side.one_run(self.path, what="harness releases --leak-pass"):
            try:
                for number, (release, todo) in enumerate(planned.items(), 1):
                    count += self._release(release, todo, f"[{number}/{len(planned)}]")
            finally:
                if self.passes is not None:
                    self.passes.close()
        return count

    def _release(self, release, todo, where):
        name = self.adapter.name
        held = resume.records_in(self.path)
        work = [(number, cell) for number in range(1, self.rounds + 1) for cell in todo
                if number not in rounds_held(held, cell)]
        if not work:
            self.say(f"{where} {name}=={release}: growth per step already measured ({len(todo)} cells x "
                     f"{self.rounds} rounds)", flush=True)
            return 0
        was_cached = envs.cached(f"{name}-{release}") is not None
        try:
            env_ = envs.for_version(self.adapter, release, torch_index=self.torch_index)
        except Unavailable as err:
            for cell in todo:
                self._append(results.new_record(cell, "unavailable", str(err), {"versions": {}}), 1)
            self.say(f"{where} {name}=={release}: unavailable: {str(err).splitlines()[0][:200]}", flush=True)
            return 0
        began = time.monotonic()
        measure = self.measure or self._passes().run
        count = 0
        verdicts = {}
        for (number, _), (_, record) in zip(work, measure([cell for _, cell in work])):
            self._append(record, number)
            count += 1
            verdict = figures.leak_verdict(record) or record.get("status")
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        spent = round(time.monotonic() - began, 1)
        store.write_env(self.out, name, release, {"leak_measure_s": spent})
        said = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
        self.say(f"{where} {name}=={release}: {count} leak pass(es) in {spent:.0f} s: {said}", flush=True)
        if not self.keep_envs and not was_cached:
            if not envs.remove(env_.path):
                self.say(f"  {env_.path}: kept, another process is using it", flush=True)
        return count

    def _passes(self):
        if self.passes is None:
            # the sweep's memory pass (its leak phase last, with BUDGETS_S), after the
            # workload's reference gradient as in the sweep; no prediction: not a figure
            # this pass reads
            options = Options(warmup=1, repeat=3, time_budget_s=1.0, timeout_s=self.timeout_s, prediction=False,
                              torch_index=self.torch_index, leak_budgets_s=self.budgets_s)
            self.passes = MemoryPasses(options, reference=True)
        return self.passes

    def _append(self, record, number):
        tagged = dict(store.compact(record), **{store.ROUND_KEY: number})
        with interrupts.deferred():  # a record is written whole
            results.append_record(self.path, tagged)


def summary(records):
    """Lines for the terminal: per release, the verdicts of the leak records and the median
    growth per step."""
    by_release = {}
    for record in records:
        if record.get("status") == "ok":
            by_release.setdefault(detect.release_of(record), []).append(record)
    lines = []
    for release in sorted(by_release, key=index.sort_key):
        mine = by_release[release]
        counts = {}
        for record in mine:
            verdict = figures.leak_verdict(record) or "not measured"
            counts[verdict] = counts.get(verdict, 0) + 1
        growing = sorted({f"{r['workload']} {r['mode']}" for r in mine if figures.leak_verdict(r) == "grows"})
        lines.append(f"growth per step at {release}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
                     + (f"; grows: {', '.join(growing)}" if growing else ""))
    return "\n".join(lines)
