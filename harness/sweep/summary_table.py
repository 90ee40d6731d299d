"""The table a sweep prints: step peak per phase and retained in MiB, peak / bound,
time, ratio to the reference engine; a legend line above it says what the step and
each memory figure are (LEGEND).

A "version" column (the exact framework version that ran) appears when any record
pinned one (``--framework jax==0.9.2``), and a "variant" column (optimizer, remat
strategy, the reference engine's order) when any record has one. Memory columns,
steady state unless marked "1st" (the cold first step): "fwd", "bwd", "opt" (the
optimizer update) and "peak" are step peaks (`peak_bytes`: above the resident bytes
at the step's start, what the step needs); "retained" is the framework's own memory
(anonymous and shared-memory pages) resident at the step's start above the baseline
taken before the first step: what it keeps between steps; "code MiB" the library
pages the steps paged in (file-backed, shared, reclaimable: harness/figures.py); the
footprint (retained + step peak) is not printed. A record written before the resident
set was split by page kind shows its whole RSS as retained, marked " rss". "1st peak"
is the cold first step's peak (compilation and first-use costs included); its
retained figure is 0 by definition (the baseline is taken just before it), so it is
not a column. "cache MiB" (only when a record has one) is what a
framework that serves steps from freed buffers (MLX, tinygrad) holds between steps
when run as its users run it: their memory passes ran with that cache off, so their
step peak is what a step needs (the record's ``buffer_cache``). "pred/peak" (only
when a record has a prediction) is the framework's own prediction of the step
divided by the measured step peak (the record's ``prediction``,
harness/measure/prediction.py); "*" marks a prediction of another program than the
measured one (TensorFlow's XLA plan of a cell run without XLA). "peak/bound" and
"mem x ref" use the step peak. Times are medians of
the repeats. "x ref" divides by the reference engine's figure for the same workload, size, dtype, device and optimizer, without
remat and in its default order (same mode when the reference ran in it, else eager),
timed on the same host (a Ray sweep's cells ran on several). A phase a cell did not measure
shows "-"; a cell that did not run shows its status and why.

A time marked noisy (harness/measure/timing.py: other processes took a CPU, or the
spread stayed wide) is printed with a trailing "~" (its "time x ref" too), and a
line under the table says why for each: such a figure is advisory, not a measurement
to compare.

Every figure comes from the figure registry (harness/figures.py), so a CUDA cell's
memory columns are its device allocator's, never the host's RSS; "reserved" (the
allocator's cache) and "NVML" (the process on the device) are added when a record has
them. A figure prefixed "<=" is an upper bound (an allocator that cannot reset its peak),
and a cuda cell whose adapter reads no allocator shows "n/a" with the reason under the
table. "mem x ref" compares figures of one source only.
"""

from typing import Callable, NamedTuple

from harness import figures
from harness import origin
from harness.measure import prediction
from harness.sweep import cells
from harness.units import MIB

class Column(NamedTuple):
    header: str
    align: str  # "<" | ">"
    cell: Callable  # (record, Row) -> str: an ok record's cell
    shown: Callable = None  # (records) -> bool: the column only where a record has it (None: always)
    leading: bool = False  # shown for a cell that did not run too (its message follows them)


class Row(NamedTuple):
    """What one ok record's cells read besides the record: the reference engine's record
    comparable with it (ratios), and whether its peak is an upper bound."""

    reference: dict | None
    bounded: bool


def _has(name):
    return lambda records: any(figures.value(r, name) is not None for r in records)


def _device(records):
    return any(figures.source(r).kind == "device" for r in records)


def figure_column(name, header, shown=None):
    """A column of the registry's figure `name`: MiB (memory) or seconds (time, "~" when
    noisy), "<=" before an upper bound, "n/a" where a CUDA cell's device has no source.
    `shown`: always (None), where a record has the figure (True), or a test of the records.
    A host figure (code pages) is the table's only on cells whose memory is the host's:
    the memory columns of a CUDA cell are its device's."""
    figure = figures.get(name)

    def cell(record, row):
        if figure.kind == figures.HOST and figures.source(record).kind != "host":
            return "-"
        if figure.unit == "seconds":
            found = figures.value(record, name)
            return _num(found, ".4f") + (NOISY if found is not None and record.get("time_noisy") else "")
        if figure.kind == figures.MEMORY and figures.source(record).kind is None:
            return "n/a"
        found, marks = figures.shown(record, name)
        return _mib(found, figures.UPPER_BOUND in marks) + (WHOLE if figures.WHOLE_RSS in marks else "")
    return Column(header, ">", cell, _has(name) if shown is True else shown)


def _field(key, fmt="{}"):
    return lambda record, row: fmt.format(record.get(key, "")) if record.get(key) is not None else "-"


def _mem_ratio(record, row):
    ref = row.reference if row.reference and not figures.comparable(record, row.reference) else None
    ratio = _ratio(figures.value(record, "step_peak"), figures.value(ref, "step_peak")) if ref else None
    return (UPPER if row.bounded else "") + _num(ratio, ".2f")


def _time_ratio(record, row):
    ratio = _ratio(figures.value(record, "time"), figures.value(row.reference, "time")) if row.reference else None
    noisy = NOISY if row.reference and (row.reference.get("time_noisy") or record.get("time_noisy")) else ""
    return _num(ratio, ".2f") + (noisy if ratio is not None else "")


#: the table's columns, in order: the cell's names, then (figure, column) pairs read
#: through the registry, and the ratios. A new figure's column is one `figure_column`
#: line here (shown=True: only where a record has it).
COLUMNS = (
    Column("workload", "<", _field("workload"), leading=True),
    Column("framework", "<", _field("framework"), leading=True),
    Column("version", "<", lambda r, row: r.get("framework_version") or r.get("version") or "-",
           lambda records: any(r.get("version") for r in records), leading=True),
    Column("mode", "<", _field("mode"), leading=True),
    Column("variant", "<", lambda r, row: cells.variant(r) or "-", lambda records: any(cells.variant(r) for r in records),
           leading=True),
    Column("status", "<", _field("status"), leading=True),
    figure_column("step_peak.forward", "fwd MiB"),
    figure_column("step_peak.backward", "bwd MiB"),
    figure_column("step_peak.step", "opt MiB"),
    figure_column("step_peak", "peak MiB"),
    figure_column("retained", "retained MiB"),
    figure_column("code_pages", "code MiB", shown=True),
    Column("cache MiB", ">", lambda r, row: _mib(_cache_bytes(r)),
           lambda records: any(_cache_bytes(r) is not None for r in records)),
    Column("leak KiB/step", ">", lambda r, row: _leak(r), lambda records: any(r.get("leak") for r in records)),
    figure_column("first_step_peak", "1st peak"),
    figure_column("reserved", "reserved MiB", shown=_device),
    figure_column("nvml", "NVML MiB", shown=_device),
    Column("peak/bound", ">", lambda r, row: (UPPER if row.bounded else "") + _num(figures.peak_over_bound(r), ".2f")),
    Column("pred/peak", ">", lambda r, row: _predicted(r),
           lambda records: any(prediction.ratio(r) is not None for r in records)),
    figure_column("time", "time s"),
    Column("IQR s", ">", lambda r, row: _num((r.get("time_spread_s") or {}).get("total"), ".4f")),
    Column("compile s", ">", lambda r, row: _num(r.get("compile_s"), ".2f")),
    Column("mem x ref", ">", _mem_ratio),
    Column("time x ref", ">", _time_ratio),
    Column("grad err", ">", lambda r, row: _num(figures.value(r, "grad_rel_err"), ".1e")),
)
#: the line above the table: what the step is and what its memory figures hold
LEGEND = ("step = forward + backward (+ the optimizer update with --optimizer); peak: the step's peak above its "
          "start, on the host the resident set under a fixed mmap threshold with the heap trimmed before each step; "
          "retained: the framework's own memory kept between steps; code: library pages the steps paged in")
OTHER_PROGRAM = "*"  # after a pred/peak ratio whose prediction is of another program
MESSAGE_CHARS = 90
NOISY = "~"  # after a time figure that is advisory only (record["time_noisy"])
UPPER = "<="  # before a figure that is an upper bound (figures.upper_bound)
WHOLE = " rss"  # after a figure of a record with no page split: its whole RSS stands in (figures.shown)


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mib(value, bounded=False):
    return "-" if value is None else (UPPER if bounded else "") + f"{value / MIB:.1f}"


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def _ratio(a, b):
    return None if a is None or not b else a / b


def reference_for(record, records):
    """The reference engine's ok record comparable with `record`, or None."""
    def same(other, mode):
        return (
            other.get("framework") == "reference"
            and other.get("status") == "ok"
            and all(other.get(k) == record.get(k) for k in ("workload", "size", "dtype", "device", "optimizer"))
            and other.get("mode") == mode
            and (other.get("remat") or "none") == "none"
            and other.get("order") in (None, "heap")
            and origin.same_host(other, record)  # one machine's figures
        )

    for mode in (record.get("mode"), "eager"):
        found = [r for r in records if same(r, mode)]
        if found:
            return found[-1]
    return None


def _cache_bytes(record):
    return _number((record.get("buffer_cache") or {}).get("held_bytes"))


def _predicted(record):
    """pred/peak as printed: the ratio, "*" when another program was predicted, or the
    prediction's state (zero, unsupported, failed), "-" when none was taken."""
    found = record.get("prediction") or {}
    value = prediction.ratio(record)
    if value is not None:
        return f"{value:.2f}" + ("" if found.get("same_program", True) else OTHER_PROGRAM)
    return {"unsupported": "-", None: "-"}.get(found.get("state"), found.get("state"))


def _leak(record):
    """growth per step in KiB, with the verdict where it is not flat ("grows", "settles", "?": inconclusive)."""
    verdict = figures.leak_verdict(record)
    found = figures.value(record, "leak")
    if verdict is None or found is None:
        return "-"
    mark = {"flat": "", "grows": " grows", "settles": " settles"}.get(verdict, " ?")
    return f"{found / 1024:.0f}{mark}"


def columns_for(records):
    """The columns shown for `records`: every column, less the optional ones no record has."""
    return [c for c in COLUMNS if c.shown is None or c.shown(records)]


def rows(records, columns):
    """[(cells, message or None)]: an ok record's every column, a cell that did not run
    its leading columns and why."""
    out = []
    for record in records:
        if record.get("status") != "ok":
            message = record.get("message") or ""
            cells_ = [c.cell(record, None) for c in columns if c.leading]
            out.append((cells_, message.strip().splitlines()[0][:MESSAGE_CHARS] if message.strip() else ""))
            continue
        row = Row(reference_for(record, records), figures.upper_bound(record, "step_peak"))
        out.append(([c.cell(record, row) for c in columns], None))
    return out


def format_table(records):
    """The table as text (one line per record; failed cells show their reason)."""
    columns = columns_for(records)
    body = rows(records, columns)
    widths = [len(c.header) for c in columns]
    for row, _ in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(str(cell)))

    def line(cells_):
        return "  ".join(f"{str(cell):{c.align}{width}}" for c, width, cell in zip(columns, widths, cells_)).rstrip()

    lines = [LEGEND, line([c.header for c in columns]), line(["-" * w for w in widths])]
    for row, message in body:
        text = line(row)
        if message is not None:
            text = f"{text}  {message}"
        lines.append(text)
    other = [r for r in records if prediction.ratio(r) is not None
             and not (r.get("prediction") or {}).get("same_program", True)]
    if other:
        lines.append(f"{OTHER_PROGRAM} pred/peak of another program than the measured one: "
                     + "; ".join(sorted({(r["prediction"].get("note") or "")[:120] for r in other})))
    whole = [r for r in records if r.get("status") == "ok" and figures.shown(r, "retained")[1]]
    if whole:
        lines.append(f"{WHOLE.strip()}: {len(whole)} record(s) written before the resident set was split by page kind: "
                     "their retained is the whole RSS (library code pages included), not the framework's own memory")
    return "\n".join(lines + source_notes(records) + noisy_notes(records) + pinned_blas_notes(records))


def source_notes(records):
    """Lines saying where a CUDA cell's memory figures come from, which are upper bounds,
    and why a cell shows none."""
    ok = [r for r in records if r.get("status") == "ok" and figures.source(r).kind != "host"]
    if not ok:
        return []
    lines = ["memory columns of cuda cells: the framework's device allocator (reserved: its cache; "
             "NVML: the process on the device), not the host's RSS"]
    for record in ok:
        if figures.source(record).kind is None:
            lines.append(f"  n/a {cells.label(record)}: {figures.source(record).reason}")
        elif figures.upper_bound(record, "step_peak"):
            lines.append(f"  {UPPER} {cells.label(record)}: {figures.upper_bound_reason(record)}")
    return lines


def noisy_notes(records):
    """Lines saying why each noisy time is noisy (first reason; the record has all)."""
    noisy = [r for r in records if r.get("status") == "ok" and r.get("time_noisy")]
    if not noisy:
        return []
    lines = [f"{NOISY} time noisy, advisory only ({len(noisy)} of {len(records)} cells):"]
    for record in noisy:
        reasons = record.get("time_noise") or ["(no reason recorded)"]
        lines.append(f"  {cells.label(record)}: {reasons[0]}" + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""))
    return lines


def pinned_blas_notes(records):
    """One line per pinned OpenBLAS setting: the NumPy rows whose time is that of the
    kernels the host pinned (figures.forced_blas), not of NumPy's own choice."""
    pinned = {}
    for record in records:
        setting = figures.forced_blas(record) if record.get("status") == "ok" else None
        if setting:
            pinned.setdefault(setting, set()).add(record.get("framework", ""))
    return [f"time of {', '.join(sorted(rows))}: NumPy's OpenBLAS ran the kernels the host pinned ({setting}); "
            f"unset them in the command to time NumPy's own choice (docs/measurement.md)"
            for setting, rows in pinned.items()]
