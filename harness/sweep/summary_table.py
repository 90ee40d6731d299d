"""The table a sweep prints: step peak per phase and retained in MiB, peak / bound,
time, ratio to the reference engine.

A "version" column (the exact framework version that ran) appears when any record
pinned one (``--framework jax==0.9.2``), and a "variant" column (optimizer, remat
strategy, the reference engine's order) when any record has one. Memory columns,
steady state unless marked "1st" (the cold first step): "fwd", "bwd", "opt" (the
optimizer update) and "peak" are step peaks (`peak_bytes`: above the resident bytes
at the step's start, what the step needs); "retained" is what was resident at the
step's start above the baseline taken before the first step (`retained_bytes`: what
the framework keeps between steps); their sum is the footprint (`footprint_bytes`,
not printed). "1st peak" is the cold first step's peak (compilation and first-use
costs included); its retained figure is 0 by definition (the baseline is taken just
before it), so it is not a column. "cache MiB" (only when a record has one) is what a
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

from harness import figures
from harness import origin
from harness.measure import prediction
from harness.sweep import cells
from harness.units import MIB

COLUMNS = (
    ("workload", "<"),
    ("framework", "<"),
    ("mode", "<"),
    ("status", "<"),
    ("fwd MiB", ">"),
    ("bwd MiB", ">"),
    ("opt MiB", ">"),
    ("peak MiB", ">"),
    ("retained MiB", ">"),
    ("1st peak", ">"),
    ("peak/bound", ">"),
    ("time s", ">"),
    ("IQR s", ">"),
    ("compile s", ">"),
    ("mem x ref", ">"),
    ("time x ref", ">"),
    ("grad err", ">"),
)
VARIANT_COLUMN = ("variant", "<")
CACHE_COLUMN = ("cache MiB", ">")  # after "retained MiB", when a record has a buffer cache
PREDICTED_COLUMN = ("pred/peak", ">")  # after "peak/bound", when a record has a prediction
OTHER_PROGRAM = "*"  # after a pred/peak ratio whose prediction is of another program
VERSION_COLUMN = ("version", "<")
MESSAGE_CHARS = 90
NOISY = "~"  # after a time figure that is advisory only (record["time_noisy"])


UPPER = "<="  # before a figure that is an upper bound (figures.upper_bound)
DEVICE_COLUMNS = (("reserved MiB", ">"), ("NVML MiB", ">"))  # after "1st peak", when a record has them


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mib(value, bounded=False):
    return "-" if value is None else (UPPER if bounded else "") + f"{value / MIB:.1f}"


def _memory(record, name):
    """A memory column: the registry's figure, "<=" before an upper bound, "n/a" where the
    cell's device has no source for it."""
    if figures.source(record).kind is None:
        return "n/a"
    return _mib(figures.value(record, name), figures.upper_bound(record, name))


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


def rows(records, with_variant=False, with_version=False, with_cache=False, with_predicted=False, with_device=False):
    out = []
    for record in records:
        row = [record.get("workload", ""), record.get("framework", "")]
        row += [record.get("framework_version") or record.get("version") or "-"] if with_version else []
        row += [record.get("mode", "")]
        row += [cells.variant(record) or "-"] if with_variant else []
        row += [record.get("status", "")]
        if record.get("status") != "ok":
            out.append((row, (record.get("message") or "").strip().splitlines()[0][:MESSAGE_CHARS] if record.get("message") else ""))
            continue
        total = figures.value(record, "step_peak")
        bounded = figures.upper_bound(record, "step_peak")
        time_total = figures.value(record, "time")
        ref = reference_for(record, records)
        noisy = NOISY if record.get("time_noisy") else ""
        time_ratio = _ratio(time_total, figures.value(ref, "time")) if ref else None
        mem_ref = ref if ref and not figures.comparable(record, ref) else None
        ref_noisy = NOISY if ref and (ref.get("time_noisy") or record.get("time_noisy")) else ""
        row += [
            _memory(record, "step_peak.forward"),
            _memory(record, "step_peak.backward"),
            _memory(record, "step_peak.step"),
            _memory(record, "step_peak"),
            _memory(record, "retained"),
            *([_mib(_cache_bytes(record))] if with_cache else []),
            _memory(record, "first_step_peak"),
            *([_mib(figures.value(record, "reserved")), _mib(figures.value(record, "nvml"))] if with_device else []),
            (UPPER if bounded else "") + _num(figures.peak_over_bound(record), ".2f"),
            *([_predicted(record)] if with_predicted else []),
            _num(time_total, ".4f") + (noisy if time_total is not None else ""),
            _num((record.get("time_spread_s") or {}).get("total"), ".4f"),
            _num(record.get("compile_s"), ".2f"),
            (UPPER if bounded else "") + _num(_ratio(total, figures.value(mem_ref, "step_peak")) if mem_ref else None, ".2f"),
            _num(time_ratio, ".2f") + (ref_noisy if time_ratio is not None else ""),
            _num(figures.value(record, "grad_rel_err"), ".1e"),
        ]
        out.append((row, None))
    return out


def format_table(records):
    """The table as text (one line per record; failed cells show their reason)."""
    with_variant = any(cells.variant(r) for r in records)
    with_version = any(r.get("version") for r in records)
    columns = COLUMNS[:2] + ((VERSION_COLUMN,) if with_version else ()) + COLUMNS[2:3]
    with_cache = any(_cache_bytes(r) is not None for r in records)
    after_retained = [name for name, _ in COLUMNS].index("retained MiB") + 1
    columns += ((VARIANT_COLUMN,) if with_variant else ()) + COLUMNS[3:after_retained]
    with_predicted = any(prediction.ratio(r) is not None for r in records)
    after_bound = [name for name, _ in COLUMNS].index("peak/bound") + 1
    with_device = any(figures.source(r).kind == "device" for r in records)
    after_first = [name for name, _ in COLUMNS].index("1st peak") + 1
    columns += ((CACHE_COLUMN,) if with_cache else ()) + COLUMNS[after_retained:after_first]
    columns += (DEVICE_COLUMNS if with_device else ()) + COLUMNS[after_first:after_bound]
    columns += ((PREDICTED_COLUMN,) if with_predicted else ()) + COLUMNS[after_bound:]
    body = rows(records, with_variant, with_version, with_cache, with_predicted, with_device)
    widths = [len(name) for name, _ in columns]
    for row, _ in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(str(cell)))
    def line(cells_):
        parts = []
        for (name, align), width, cell in zip(columns, widths, cells_):
            parts.append(f"{str(cell):{align}{width}}")
        return "  ".join(parts).rstrip()

    lines = [line([name for name, _ in columns]), line(["-" * w for w in widths])]
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
