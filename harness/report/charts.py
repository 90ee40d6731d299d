"""Bar charts per workload: step peak per phase (above the resident bytes at the step's
start) and time per phase, per framework.

Horizontal grouped bars on a linear scale from zero (so lengths compare honestly),
the analytic bound as a dashed line on the memory chart, cells that did not run named
by their status instead of a bar.
"""

from harness import figures
from harness.report import records as rec
from harness.report import svg
from harness.report.fmt import esc, human_bytes, human_seconds

LABEL_W, PLOT_W, VALUE_W = 170, 380, 90
BAR_H, GROUP_GAP, TOP = 11, 9, 40


def bar_chart(title, rows, series, fmt, marker=None):
    """rows: [(label, {series: value|None} or status text)]; marker: (value, label) or None."""
    values = [v for _, vals in rows if isinstance(vals, dict) for v in vals.values() if v is not None]
    scale_max = max(values + ([marker[0]] if marker else []) + [0.0])
    scale = PLOT_W / scale_max if scale_max > 0 else 0.0
    group_h = len(series) * BAR_H + GROUP_GAP
    height = TOP + len(rows) * group_h + 16
    parts = [svg.text(0, 14, title, cls="title"), svg.legend(series, LABEL_W, 28)]
    y = TOP
    for label, vals in rows:
        parts.append(svg.text(LABEL_W - 6, y + group_h / 2, label, anchor="end"))
        if not isinstance(vals, dict):  # a status: oom, error, unavailable ...
            parts.append(svg.text(LABEL_W + 4, y + group_h / 2, vals, cls="status-text"))
        else:
            for index, name in enumerate(series):
                top = y + index * BAR_H
                value = vals.get(name)
                if value is None:
                    parts.append(svg.text(LABEL_W + 4, top + BAR_H - 2, f"{name}: n/a", cls="small"))
                    continue
                width = value * scale
                parts.append(svg.rect(LABEL_W, top, width, BAR_H - 2, svg.colour(name, index), f"{label} {name}: {fmt(value)}"))
                parts.append(svg.text(LABEL_W + width + 4, top + BAR_H - 2, fmt(value), cls="small"))
        y += group_h
    if marker and scale:
        x = LABEL_W + marker[0] * scale
        parts.append(svg.line(x, TOP - 4, x, height - 12, "bound"))
        parts.append(svg.text(x + 3, height - 2, marker[1], cls="small bound-label"))
    return svg.svg(LABEL_W + PLOT_W + VALUE_W, height, "".join(parts), title)


def _rows(view, workload, name, phases):
    rows = []
    for column in view["columns"]:
        record = view["cells"].get((workload, column))
        if record is None:
            continue
        if record.get("status") != "ok":
            rows.append((column, str(record.get("status"))))
        else:
            noisy = name == "time" and record.get("time_noisy")  # advisory: say so at the bar
            bounded = figures.upper_bound(record, name)  # JAX's un-resettable CUDA peak: at most this
            label = f"{column} ~ noisy" if noisy else f"{column} ≤ (upper bound)" if bounded else column
            rows.append((label, {phase: figures.at(record, name, phase) for phase in phases}))
    return rows


def _present_phases(view, workload, name):
    """Phases any ok record of this workload has (step only with an optimizer)."""
    found = []
    for phase in rec.PHASES + ("total",):
        for column in view["columns"]:
            record = view["cells"].get((workload, column))
            if record and figures.at(record, name, phase) is not None:
                found.append(phase)
                break
    split = [p for p in found if p != "total"]
    return split or found  # compiled gradients that cannot split show their total


def _bound(view, workload):
    for column in view["columns"]:
        record = view["cells"].get((workload, column))
        if figures.value(record, "bound"):
            return figures.value(record, "bound")
    return None


def render(view):
    """The two charts for every workload of a view, as HTML."""
    blocks = []
    for workload in view["workloads"]:
        peak_phases = _present_phases(view, workload, "step_peak")
        time_phases = _present_phases(view, workload, "time")
        bound = _bound(view, workload)
        marker = (bound, f"bound {human_bytes(bound)}") if bound else None
        memory = bar_chart(
            f"{workload}: step peak per phase", _rows(view, workload, "step_peak", peak_phases),
            peak_phases or ["total"], human_bytes, marker,
        )
        time = bar_chart(
            f"{workload}: time per phase (median)", _rows(view, workload, "time", time_phases),
            time_phases or ["total"], human_seconds,
        )
        blocks.append(f'<div class="charts" data-workload="{esc(workload)}">{memory}{time}</div>')
    return "".join(blocks)
