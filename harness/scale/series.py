"""Records of one cell at several batches (a *series*) and the lines fitted through them.

Two lines per series, from the steady state of each memory pass (harness/results.py):

- the **step peak** (``peak_bytes``: the step's peak above what is resident at its
  start: what the gradient needs), per phase: its slope is the bytes each sample costs
  the step, and slope / bound per sample is the autodiff efficiency with fixed costs
  taken out;
- the **footprint** (``footprint_bytes`` = retained + step peak: what the process needs
  above its baseline), the larger of the cold first step's and the steady state's
  total, since a batch fits only if its worst step does: the prediction of the largest
  batch under a budget uses this line.

For the reference engine, autograd and PyTensor, whose arrays NumPy reports to
tracemalloc, the tracemalloc peak (exact bytes of arrays, no allocator slack) is fitted
as well: a cross-check of the RSS slope.

Records that are not "ok" (an allocation failed, a worker was killed, a timeout) are
kept out of the fit and listed with their status; verification records (``scale_check``,
written by `harness scale --verify`) never enter a fit.
"""

from dataclasses import dataclass, field

from harness import figures, results, workloads
from harness.sweep import resume
from harness.scale.fit import FitError, fit_line

PHASES = results.PHASES


def footprint_of(record):
    """The footprint a batch needs: the larger of the first step's and the steady
    state's total (bytes above the baseline), or None."""
    found = [figures.value(record, name) for name in ("footprint", "first_step_footprint")]
    found = [f for f in found if f is not None]
    return max(found) if found else None


def spread_of(record):
    """How far the footprints of one pass's steps lie apart (the first step's and each
    measured steady step's total), bytes: the scatter a second measurement of the same
    batch can show, the margin a prediction near a budget keeps (the median steady
    step's figure is one of the steady samples)."""
    found = [figures.value(record, name) for name in ("first_step_footprint", "footprint")]
    if figures.source(record).kind == "host":  # the steady samples are the host's figures
        found += [figures.value(dict(sample, status="ok", device="cpu"), "footprint")
                  for sample in record.get("steady_samples") or []]
    found = [f for f in found if f is not None] or [0]
    return max(found) - min(found)


def rounds(checks, budget):
    """The verification rounds of `budget` in `checks` (records carrying scale_check):
    [(predicted batch, [(factor, record), ...]), ...], oldest first. Round 0 checks the
    fit's prediction; each later round a prediction from the points measured near the
    budget (harness scale --verify). Records from before rounds were numbered are
    round 0, grouped by their predicted batch."""
    out = {}
    for record in checks:
        check = record["scale_check"]
        if check.get("budget_bytes") != budget:
            continue
        key = (check.get("round", 0), check.get("predicted_batch"))
        out.setdefault(key, []).append((check.get("factor"), record))
    return [(batch, found) for (_, batch), found in sorted(out.items(), key=lambda kv: kv[0][0])]


@dataclass
class Series:
    """One cell (everything but the batch) measured at several batches."""

    cell: dict  # the first record's cell keys, batch removed
    records: dict = field(default_factory=dict)  # batch -> newest fit record
    checks: list = field(default_factory=list)  # verification records, file order

    @property
    def label(self):
        from harness.sweep.cells import label

        return label(self.cell)


@dataclass
class SeriesFit:
    series: Series
    bound_per_sample: int = None
    peak: dict = field(default_factory=dict)  # phase -> Line (step peak)
    footprint: object = None  # Line, or None
    traced: dict = field(default_factory=dict)  # phase -> Line (tracemalloc), NumPy engines
    kept_out: list = field(default_factory=list)  # (batch, status, message) not fitted
    note: str = ""  # why there is no fit (or what limits it)

    @property
    def ok(self):
        return "total" in self.peak and self.footprint is not None

    def efficiency(self, phase="total"):
        """Step-peak bytes per sample / bound per sample."""
        line = self.peak.get(phase)
        if line is None or not self.bound_per_sample:
            return None
        return line.per_sample / self.bound_per_sample


def group(records):
    """{series key: Series} of the records that carry a batch, in first-seen order;
    within a series the newest record of a batch wins (files are read oldest first)."""
    out = {}
    for record in records:
        if record.get("batch") is None:
            continue
        key = resume.series_key(record)
        series = out.get(key)
        if series is None:
            cell = {k: record.get(k) for k in results.CELL_KEYS + results.VARIANT_KEYS}
            cell["batch"] = None  # a series is every batch of the cell
            series = out[key] = Series(cell)
        if record.get("scale_check"):
            series.checks.append(record)
        else:
            series.records.pop(record["batch"], None)
            series.records[record["batch"]] = record
    return out


def _recorded_bound_per_sample(series):
    """A native step's bound per sample, from its records (its bound_bytes(cfg) ran in
    each worker): the bound at the smallest batch measured, over that batch (a bound
    is linear in the batch through zero, as every workload's is); None without one."""
    for batch in sorted(series.records):
        bound = series.records[batch].get("bound_bytes")
        if bound:
            return bound / batch
    return None


def fit(series):
    """The SeriesFit of `series` (never raises: what cannot be fitted is in `note`)."""
    result = SeriesFit(series)
    cell = series.cell
    try:
        if workloads.native(cell["workload"]) is not None:  # its bound_bytes runs in its worker: read the records
            result.bound_per_sample = _recorded_bound_per_sample(series)
        else:
            result.bound_per_sample = workloads.bound_per_sample(cell["workload"], cell["size"], cell["dtype"])
    except (ValueError, KeyError) as err:  # a workload or size this checkout does not know
        result.note = f"no bound per sample: {err}"
    ok = {}
    for batch in sorted(series.records):
        record = series.records[batch]
        if record.get("status") == "ok":
            ok[batch] = record
        else:
            result.kept_out.append((batch, record.get("status"), record.get("message") or ""))
    if len(ok) < 2:
        result.note = f"a line needs 2 or more batches measured ok, got {sorted(ok) or 'none'}"
        if result.kept_out:
            result.note += "; kept out: " + "; ".join(f"batch {b} {s}" for b, s, _ in result.kept_out)
        return result
    try:
        for phase in PHASES:
            points = _points(ok, lambda r: figures.at(r, "step_peak", phase))
            if points is not None:
                result.peak[phase] = fit_line(points)
        points = _points(ok, footprint_of)
        if points is not None:
            result.footprint = fit_line(points)
        for phase in PHASES:
            points = _points(ok, lambda r: figures.at(r, "tracemalloc_peak", phase))
            if points is not None:
                result.traced[phase] = fit_line(points)
    except FitError as err:
        result.note = f"{len(ok)} ok batch(es) {sorted(ok)}: {err}"
    if not result.note and result.kept_out:
        result.note = "kept out of the fit: " + "; ".join(f"batch {b} {s}" for b, s, _ in result.kept_out)
    return result


def _points(records, figure):
    """[(batch, bytes)] when every record has the figure (a phase every batch ran),
    None when none has it; FitError when only some have it."""
    values = {b: figure(r) for b, r in records.items()}
    present = {b: v for b, v in values.items() if isinstance(v, (int, float))}
    if not present:
        return None
    if len(present) != len(values):
        missing = sorted(set(values) - set(present))
        raise FitError(f"batches {missing} lack a figure the others have")
    return sorted(present.items())


def verdict(checks, budget):
    """"confirmed" when the footprint at the prediction fits and at 1.25x it does not
    (a pass that ran out of memory there counts as not fitting), else what failed."""
    by = dict(checks)
    at, above = by.get(1.0), next((r for f, r in checks if f != 1.0), None)
    problems = []
    if at is None or at.get("status") != "ok":
        problems.append("the prediction did not run" if at is None else f"the prediction: {at.get('status')}")
    elif footprint_of(at) > budget:
        problems.append("the prediction does not fit")
    if above is None:
        problems.append("1.25x did not run")
    elif above.get("status") == "ok" and footprint_of(above) <= budget:
        problems.append("1.25x fits too (the prediction is low)")
    elif above.get("status") not in ("ok", "oom"):
        problems.append(f"1.25x: {above.get('status')}")
    return "confirmed" if not problems else "NOT confirmed: " + "; ".join(problems)
