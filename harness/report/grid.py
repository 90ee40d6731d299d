"""The workload × framework grid of one view, the lowest step peak of each row marked.

A cell shows the step peak (what one steady step needs above what was resident at its
start: the headline), what the framework retained between steps beside it, the step
peak over the analytic bound, the first step's peak, the time, and a stacked bar of
the footprint (harness/report/split.py).

Colour: the lowest exact step peak of each workload's row is green, as on the site's
front page (harness/report/lowest.py: one rule, one meaning); peak / bound is a number
in the cell, not a colour. Cells that did not run say so (status and message) on a
grey or striped background.
"""

from harness import figures
from harness.measure import prediction
from harness.report import lowest, split
from harness.report.fmt import esc, human_bytes, human_ratio, human_seconds

MESSAGE_CHARS = 90


def _ok_cell(record, scale, row_lowest=None):
    source = figures.source(record)
    if source.kind is None:  # a CUDA cell without a device figure: none shown, and why
        return (f'<td class="cell status-ok" data-source="none" title="{esc(source.reason)}">'
                f'<div class="peak">no device figure</div><div class="message">{esc(source.reason)}</div>'
                f'{_host_line(record)}{_time_line(record, figures.value(record, "time"))}</td>')
    bounded = figures.upper_bound(record, "step_peak")
    ratio = figures.peak_over_bound(record)
    # an upper bound is never marked: it cannot show that it is the lowest
    marked = lowest.marks(record, row_lowest)
    classes = "cell status-ok" + (f" {lowest.CSS_CLASS}" if marked else "")
    peak = figures.value(record, "step_peak")
    retained, retained_marks = figures.shown(record, "retained")
    whole = (f' <span class="whole-rss" title="written before the resident set was split by page kind: the whole '
             f'RSS, library code pages included">(whole RSS)</span>') if figures.WHOLE_RSS in retained_marks else ""
    first = figures.value(record, "first_step_peak")
    le = "≤ " if bounded else ""
    cache = (record.get("buffer_cache") or {}).get("held_bytes")
    lines = [
        f'<div class="peak">{le}{esc(human_bytes(peak))}'
        f'<span class="retained"> + {esc(human_bytes(retained))} retained{whole}</span></div>',
        (f'<div class="cache" title="{esc((record.get("buffer_cache") or {}).get("memory_pass", ""))}">'
         f'+ {esc(human_bytes(cache))} buffer cache (off while measured)</div>') if cache is not None else "",
        f'<div class="ratio">{le}{esc(human_ratio(ratio))} bound</div>' if ratio is not None else "",
        (f'<div class="upper-bound" title="{esc(figures.upper_bound_reason(record))}">upper bound</div>'
         if bounded else ""),
        f'<div class="first">first step {esc(human_bytes(first))}</div>' if first is not None else "",
        _device_lines(record) if source.kind == "device" else "",
        _listed_lines(record),
        _predicted_line(record),
        _time_line(record, figures.value(record, "time")),
        split.render(record, scale),
    ]
    title = [f"{lowest.MEANING}"] if marked else []
    if record.get("step_program"):
        title.append(f"step program: {record['step_program']}")
    program = f' title="{esc("; ".join(title))}"' if title else ""
    upper = ' data-upper-bound="1"' if bounded else ""
    return (f'<td class="{classes}" data-source="{source.kind}"{upper} '
            f'data-ratio="{ratio if ratio is not None and not bounded else ""}"{program}>'
            f'{"".join(lines)}</td>')


def _listed_lines(record):
    """A line for each figure the registry lists for the page (figures.PAGE) that the
    record has: its label, value and, on hover, its meaning."""
    lines = []
    for figure in figures.listed(figures.PAGE):
        found = figures.value(record, figure.name)
        if found is None:
            continue
        shown = human_bytes(found) if figure.unit == "bytes" else f"{found:.4g}"
        lines.append(f'<div class="figure" data-figure="{esc(figure.name)}" title="{esc(figure.meaning)}">'
                     f'{esc(figure.label)} {esc(shown)}</div>')
    return "".join(lines)


def _device_lines(record):
    """Beside the allocator's figures of a CUDA cell: its cache (reserved), NVML's figure
    of the process, and the host's RSS, each named (docs/gpu.md defines them)."""
    reserved, nvml = figures.value(record, "reserved"), figures.value(record, "nvml")
    parts = []
    if reserved is not None:
        parts.append(f"reserved {human_bytes(reserved)}")
    if nvml is not None:
        parts.append(f"NVML {human_bytes(nvml)}")
    text = f'<div class="device">{esc(" · ".join(parts))}</div>' if parts else ""
    return text + _host_line(record)


def _host_line(record):
    host = figures.value(record, "host_step_peak")
    if host is None or figures.source(record).kind == "host":
        return ""
    return f'<div class="host" title="the process\'s RSS on the host, not device memory">host RSS {esc(human_bytes(host))}</div>'


def _predicted_line(record):
    """The framework's own prediction of the step, never shown as measured: its figure
    and its ratio to the measured step peak (or "prediction failed", with the reason)."""
    found = record.get("prediction") or {}
    value = prediction.ratio(record)
    if value is not None:
        other = "" if found.get("same_program", True) else " of another program *"
        return (f'<div class="predicted" title="{esc(found.get("method") or "")}">predicted '
                f'{esc(human_bytes(found.get("bytes")))}{esc(other)} ({esc(human_ratio(value))} measured)</div>')
    if found.get("state") in ("failed", "zero"):
        return f'<div class="predicted" title="{esc(found.get("reason") or "")}">prediction {esc(found["state"])}</div>'
    return ""


def _time_line(record, seconds):
    """The median time; a noisy one is marked and its reasons are the tooltip, and so is
    one of a NumPy row whose BLAS kernels the host pinned (figures.forced_blas)."""
    pinned = figures.forced_blas(record)
    kernels = (f'<span class="pinned" title="NumPy\'s OpenBLAS ran the kernels the host pinned ({esc(pinned)}), '
               f'not its own choice for this CPU"> · pinned BLAS</span>') if pinned else ""
    if not record.get("time_noisy"):
        return f'<div class="time">{esc(human_seconds(seconds))}{kernels}</div>'
    why = "; ".join(record.get("time_noise") or []) or "noisy"
    return f'<div class="time noisy" title="{esc(why)}">{esc(human_seconds(seconds))} ~ noisy{kernels}</div>'


def _failed_cell(record):
    status = str(record.get("status"))
    message = str(record.get("message") or "")
    short = message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"
    return (
        f'<td class="cell status-{esc(status)}" title="{esc(message)}">'
        f'<div class="status">{esc(status)}</div><div class="message">{esc(short)}</div></td>'
    )


def render(view):
    """HTML table for one view from `records.views()`."""
    head = "".join(f"<th>{esc(column)}</th>" for column in view["columns"])
    rows = []
    for workload in view["workloads"]:
        cells = []
        row = [view["cells"].get((workload, column)) for column in view["columns"]]
        scale = split.scale_bytes([r for r in row if r is not None])
        row_lowest = lowest.of_row(row)
        for record in row:
            if record is None:
                cells.append('<td class="cell absent">not run</td>')
            elif record.get("status") == "ok":
                cells.append(_ok_cell(record, scale, row_lowest))
            else:
                cells.append(_failed_cell(record))
        rows.append(f'<tr><th class="workload">{esc(workload)}</th>{"".join(cells)}</tr>')
    return (
        '<table class="grid"><thead><tr><th>workload \\ framework</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


#: the sentence under the grid: what each figure means
MEANING = (
    "A <b>step</b> is the forward and the backward pass (and the optimizer update where the sweep "
    "ran with <code>--optimizer</code>). The <b>step peak</b> is what one steady step needs: its peak "
    "above the memory resident when it started (on the host the resident set, measured under a fixed "
    "mmap threshold with the heap trimmed before each step, so memory freed and reused inside the step "
    "is counted). <b>Retained</b> is what the framework keeps between steps, its own memory (compiled "
    "executables, caches, allocator pools, optimizer state): the anonymous and shared-memory pages "
    "resident at the step's start above the baseline taken before the first step. The library "
    "<b>code pages</b> the steps paged in (file-backed, shared with every process that maps the library, "
    "dropped under memory pressure) are shown apart, never in retained. Retained + step peak is the "
    "<b>footprint</b>, what the process needs above its inputs; the green and the ratio to the bound use "
    "the step peak. "
    "A <b>compiled</b> cell measures the program that framework's users write: one program for the "
    "whole step where they write one (<code>jax.jit(jax.value_and_grad(f))</code>, a "
    "<code>tf.function</code>, one PyTensor function, <code>mx.compile</code>, <code>TinyJit</code>), "
    "so it has no forward/backward split; torch.compile and Paddle's to_static run forward and backward "
    "as two programs themselves (hover a cell for its step program). MLX and tinygrad serve steps from "
    "freed buffers they keep: their memory passes run with that <b>buffer cache</b> off, so their step "
    "peak is what a step allocates, as in every other row, and what the cache holds between steps when "
    "on is shown beside it. \u201cpredicted\u201d is the framework's own prediction of the step "
    "(JAX's <code>memory_analysis()</code>, torch's <code>MemTracker</code>, XLA's buffer assignment, "
    "PyTensor's profiler), beside the measurement and never instead of it. "
    "On <b>CUDA</b> every memory figure is the framework's device allocator's (what its tensors hold), "
    "with the allocator's cache (<b>reserved</b>), NVML's figure of the process and the host's RSS beside "
    "it; a cell whose adapter reads no allocator shows no memory figure. A figure marked "
    "<b>≤</b> and <b>upper bound</b> (JAX's allocator cannot reset its peak) is at most that, and is "
    "never marked the lowest."
)


def legend():
    return (
        f'<p class="meaning">{MEANING}</p>'
        '<p class="legend">Cell: step peak + retained (steady state, all phases), step peak / analytic '
        "bound, step peak of the cold first step, median time of one step (\u201c~ noisy\u201d: other "
        "processes took a CPU or the repeats spread widely, so the time is advisory; hover for why; "
        "\u201cpinned BLAS\u201d: a NumPy row timed on the OpenBLAS kernels the host pinned, not NumPy's own). "
        f"{split.legend()} "
        f'<span class="swatch {lowest.CSS_CLASS}">green</span>: {lowest.MEANING} (exact figures only; '
        "peak / bound is the number under the peak, not a colour) "
        '<span class="swatch status-unavailable">unavailable</span>'
        '<span class="swatch status-error">error / oom / timeout</span></p>'
    )
