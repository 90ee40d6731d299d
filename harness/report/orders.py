"""The execution-order table: the reference engine's peak under each backward schedule.

PR #4746 (PyTorch) showed the order in which a backward pass runs its VJPs can change
the peak several-fold on a reused Linear: each gradient contribution is alive until it
is accumulated. The reference engine runs the same graph as a max-heap by creation
order (PyTorch's), breadth-first, or depth-first; this table puts their peaks side by
side per workload, the heap's as 1.00.
"""

from harness import figures
from harness.report import records as rec
from harness.report.fmt import esc, human_bytes, human_ratio

ORDERS = ("heap", "bfs", "dfs")


def render(records):
    """The section's HTML, or "" when the reference engine ran in only one order."""
    ran = [r for r in records if r.get("framework") == "reference" and (r.get("remat") or "none") == "none"]
    if len({r.get("order") or "heap" for r in ran}) < 2:
        return ""
    table = {}
    for record in ran:
        table.setdefault((rec.view_key(record), record["workload"]), {})[record.get("order") or "heap"] = record
    rows = []
    for view, workload in sorted(table, key=lambda k: (rec.view_rank(k[0]), rec.workload_rank(k[1]))):
        by = table[(view, workload)]
        heap = figures.value(by.get("heap"), "step_peak")
        cells = []
        for order in ORDERS:
            record = by.get(order)
            peak = figures.value(record, "step_peak")
            if record is None:
                cells.append('<td class="absent">–</td>')
            elif peak is None:
                cells.append(f'<td class="status-{esc(record.get("status"))}">{esc(record.get("status"))}</td>')
            else:
                ratio = human_ratio(peak / heap) if heap else "–"
                cells.append(f'<td><span class="peak">{esc(human_bytes(peak))}</span> <span class="ratio">{ratio}</span></td>')
        rows.append(f"<tr><td>{esc(rec.view_title(view))}</td><th>{esc(workload)}</th>{''.join(cells)}</tr>")
    head = "".join(f"<th>{o}</th>" for o in ORDERS)
    return (
        f'<table class="orders"><thead><tr><th>view</th><th>workload</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="legend">The reference engine\'s steady-state peak per backward order, and its '
        "ratio to the heap order (PyTorch's schedule).</p>"
    )
