"""Counts of cells per status, and every cell that did not run with its message."""

from collections import Counter

from harness.report import records as rec
from harness.report.fmt import esc


def summary(records):
    counts = Counter(str(r.get("status")) for r in records)
    order = list(rec.STATUSES) + sorted(set(counts) - set(rec.STATUSES))
    return " ".join(
        f'<span class="badge status-{esc(s)}">{esc(s)}: {counts[s]}</span>' for s in order if counts[s]
    )


def render(records):
    failed = [r for r in records if r.get("status") != "ok"]
    if not failed:
        return '<p class="none">Every cell ran.</p>'
    rows = []
    for record in failed:
        cell = " · ".join(str(record.get(key)) for key in rec.CELL_KEYS)
        if record.get("batch") is not None:  # a `harness scale` point
            cell += f" · batch {record['batch']}"
        rows.append(
            f'<tr class="status-{esc(record.get("status"))}"><td>{esc(cell)}</td>'
            f'<td>{esc(record.get("status"))}</td><td class="message">{esc(record.get("message") or "")}</td></tr>'
        )
    return (
        '<table class="statuses"><thead><tr><th>cell (workload · size · dtype · framework · mode · device)</th>'
        f"<th>status</th><th>message</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
