"""The scaling section: memory against the batch, from `harness scale` records.

Per view (size, dtype, device, mode, optimizer) and workload, a chart of the step
peak against the batch, one line per framework (its measured points joined; the
fitted line dashed), the analytic bound dashed in red; then the table of the fitted
lines (harness/scale/series.py): step-peak bytes per sample, fixed bytes, R², largest
residual, per_sample / bound per sample; the footprint line; and the largest batch
whose footprint fits each budget (the budgets `--verify` checked, else 1 and 8 GiB),
with the verification rounds where they ran.
"""

from harness.report import records as rec
from harness.report import svg
from harness.report.fmt import esc, human_bytes, human_ratio
from harness.scale import series as scale_series
from harness.scale.fit import FitError, largest_batch
from harness.units import GIB

DEFAULT_BUDGETS = (GIB, 8 * GIB)
W, H, LEFT, BOTTOM, TOP, RIGHT = 460, 260, 70, 34, 26, 110


def _fits(records):
    grouped = scale_series.group(records)
    return [scale_series.fit(s) for s in grouped.values()]


def _budgets(fits):
    found = sorted({c["scale_check"]["budget_bytes"] for f in fits for c in f.series.checks})
    return found or list(DEFAULT_BUDGETS)


def _chart(workload, fits):
    """Step peak (total) against batch, one polyline per framework, linear from 0."""
    shown = [f for f in fits if "total" in f.peak]
    if not shown:
        return ""
    points = [(b, y) for f in shown for b, y in f.peak["total"].points]
    max_b = max(b for b, _ in points)
    bound = shown[0].bound_per_sample
    max_y = max([y for _, y in points] + ([bound * max_b] if bound else []))
    sx = (W - LEFT - RIGHT) / max_b
    sy = (H - TOP - BOTTOM) / max_y if max_y > 0 else 0.0
    X = lambda b: LEFT + b * sx  # noqa: E731
    Y = lambda y: H - BOTTOM - y * sy  # noqa: E731
    parts = [
        svg.text(0, 14, f"{workload}: step peak against batch", cls="title"),
        svg.line(LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM, "axis"),
        svg.line(LEFT, TOP, LEFT, H - BOTTOM, "axis"),
        svg.text(LEFT - 4, Y(max_y) + 4, human_bytes(max_y), anchor="end", cls="small"),
        svg.text(LEFT - 4, H - BOTTOM + 4, "0", anchor="end", cls="small"),
        svg.text(X(max_b), H - BOTTOM + 14, str(max_b), anchor="middle", cls="small"),
        svg.text((LEFT + W - RIGHT) / 2, H - 4, "batch", anchor="middle", cls="small"),
    ]
    if bound:
        parts.append(svg.line(X(0), Y(0), X(max_b), Y(bound * max_b), "bound", f"bound: {human_bytes(bound)} per sample"))
    for index, fit in enumerate(shown):
        line, colour = fit.peak["total"], svg.colour(fit.series.cell["framework"], index + 4)
        name = rec.column_key(fit.series.cell)
        coords = " ".join(f"{X(b):.1f},{Y(y):.1f}" for b, y in line.points)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for b, y in line.points:
            parts.append(f'<circle cx="{X(b):.1f}" cy="{Y(y):.1f}" r="2.5" fill="{colour}">'
                         f"<title>{esc(name)} batch {b}: {esc(human_bytes(y))}</title></circle>")
        first, last = line.points[0][0], line.points[-1][0]
        parts.append(f'<line x1="{X(first):.1f}" y1="{Y(line.at(first)):.1f}" x2="{X(last):.1f}" '
                     f'y2="{Y(line.at(last)):.1f}" stroke="{colour}" stroke-dasharray="3 3" class="fitted"/>')
        parts.append(svg.rect(W - RIGHT + 8, TOP + index * 14, 10, 10, colour))
        parts.append(svg.text(W - RIGHT + 22, TOP + index * 14 + 9, name, cls="small"))
    return svg.svg(W, H, "".join(parts), f"{workload}: step peak against batch")


def _line_cells(line, bound_per_sample=None):
    if line is None:
        return '<td class="absent" colspan="5">–</td>'
    ratio = human_ratio(line.per_sample / bound_per_sample) if bound_per_sample else "–"
    r2 = "–" if line.r2 is None else f"{line.r2:.4f}"
    low = ' class="low-r2"' if line.r2 is not None and line.r2 < 0.99 else ""
    return (f"<td>{esc(human_bytes(line.per_sample))}</td><td>{esc(human_bytes(line.fixed))}</td>"
            f"<td{low}>{r2}</td><td>{esc(human_bytes(line.max_residual))}</td><td>{ratio}</td>")


def _prediction_cell(fit, budget):
    """The fit's largest batch under `budget`; where `--verify` ran, each round's
    prediction and measurements, and the last round's verdict."""
    if fit.footprint is None:
        return '<td class="absent">–</td>'
    try:
        batch = largest_batch(fit.footprint, budget)
    except FitError as err:
        return f'<td class="message">{esc(err)}</td>'
    rounds = scale_series.rounds(fit.series.checks, budget)
    if not rounds:
        return f"<td>{batch}</td>"
    said = scale_series.verdict(rounds[-1][1], budget)
    measured = "<br>".join(  # a round per line: the prediction's footprint, then 1.25x's
        esc(" · ".join(
            f"{c['batch']}: {human_bytes(scale_series.footprint_of(c)) if c.get('status') == 'ok' else c.get('status')}"
            for _, c in sorted(checks, key=lambda fc: fc[0])))
        for _, checks in rounds)
    kind = "verified" if said == "confirmed" else "unverified"
    return (f'<td class="{kind}">{rounds[-1][0]}<br><span class="ratio">fit: {batch}<br>{measured}</span>'
            f"<br>{esc(said)}</td>")


def render(records):
    """The section's HTML, or "" when no record carries a batch."""
    fits = _fits(records)
    if not fits:
        return ""
    budgets = _budgets(fits)
    by_view = {}
    for fit in fits:
        by_view.setdefault(rec.view_key(fit.series.cell), {}).setdefault(fit.series.cell["workload"], []).append(fit)
    blocks = []
    for view in sorted(by_view, key=rec.view_rank):
        workloads_ = sorted(by_view[view], key=rec.workload_rank)
        charts = "".join(_chart(w, by_view[view][w]) for w in workloads_)
        rows, notes = [], []
        for workload in workloads_:
            for fit in sorted(by_view[view][workload], key=lambda f: rec.column_rank(rec.column_key(f.series.cell))):
                name = rec.column_key(fit.series.cell)
                batches = ",".join(str(b) for b in sorted(fit.series.records))
                rows.append(
                    f"<tr><th>{esc(workload)}</th><th>{esc(name)}</th><td>{esc(batches)}</td>"
                    f"{_line_cells(fit.peak.get('total'), fit.bound_per_sample)}"
                    f"{_line_cells(fit.footprint)}"
                    + "".join(_prediction_cell(fit, b) for b in budgets) + "</tr>"
                )
                if fit.note:
                    notes.append(f"<li>{esc(workload)} {esc(name)}: {esc(fit.note)}</li>")
        line_head = "<th>per sample</th><th>fixed</th><th>R²</th><th>max residual</th><th>/ bound</th>"
        budget_head = "".join(f"<th>largest batch ≤ {esc(human_bytes(b))}</th>" for b in budgets)
        blocks.append(
            f"<h3>{esc(rec.view_title(view))}</h3><div class=\"charts\">{charts}</div>"
            '<table class="scaling"><thead><tr><th rowspan="2">workload</th><th rowspan="2">framework</th>'
            '<th rowspan="2">batches</th><th colspan="5">step peak (total)</th><th colspan="5">footprint</th>'
            f'<th colspan="{len(budgets)}">prediction</th></tr><tr>{line_head}{line_head}{budget_head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
            + (f'<ul class="legend">{"".join(notes)}</ul>' if notes else "")
        )
    return "".join(blocks) + (
        '<p class="legend">Each batch is one memory pass in a fresh process (`harness scale`); lines are '
        "least-squares fits of bytes = fixed + per sample × batch. Step peak: above the bytes resident at the "
        "step's start (what the gradient needs); / bound: its bytes per sample over the workload's analytic "
        "bound per sample (the autodiff efficiency with fixed costs taken out). Footprint: retained + step peak, "
        "the larger of the first and the steady step (what the process needs above its baseline of interpreter, "
        "framework, parameters and inputs); the largest batch is the footprint line solved against the budget; "
        "verified: measured at that batch (fits) and at 1.25× it (does not); where that failed, a batch predicted "
        "from the two measured points bracketing the budget, measured the same way (each round listed). R² below "
        "0.99 is marked; cells that failed at a batch are kept out of the fit and listed.</p>"
    )
