"""Saved activations by op: per workload, one table whose rows are the op set's ops and
whose columns are the view's cells, so that two frameworks' lists line up
(harness/measure/saved_ops.py). Each figure is the bytes the forward kept for the
backward that the op made (times how many buffers); the framework's own names are the
cell's tooltip. An op with no counterpart in the op set keeps its own name, marked *.
A cell whose framework gives no way to tell (or a record from before saved_by_op)
says so in its column header's note.
"""

from harness.report import records as rec
from harness.report.fmt import esc, human_bytes


def _table(workload, view):
    columns, found = [], {}
    for column in view["columns"]:
        record = view["cells"].get((workload, column))
        if record is None or record.get("status") != "ok":
            continue
        saved = record.get("saved_by_op")
        columns.append((column, saved))
        for op, row in ((saved or {}).get("ops") or {}).items():
            found.setdefault(op, {})[column] = row
    if not found:
        return ""
    head = "".join(f"<th>{esc(column)}</th>" for column, _ in columns)
    order = sorted(found, key=lambda op: -max(r["bytes"] for r in found[op].values()))
    body = []
    for op in order:
        first = next(iter(found[op].values()))
        mark = "" if first.get("in_op_set") else " *"
        cells = []
        for column, saved in columns:
            row = found[op].get(column)
            if not (saved or {}).get("ops"):
                cells.append('<td class="absent">–</td>')
            elif row is None:
                cells.append('<td class="absent">0</td>')
            else:
                title = ", ".join(row["names"]) + (f'; read by {", ".join(row["read_by"])}' if row.get("read_by") else "")
                cells.append(f'<td title="{esc(title)}">{esc(human_bytes(row["bytes"]))}'
                             f' <span class="count">×{row["count"]}</span></td>')
        body.append(f'<tr><th class="op">{esc(op)}{mark}</th>{"".join(cells)}</tr>')
    totals = []
    for column, saved in columns:
        if (saved or {}).get("ops"):
            totals.append(f'<td>{esc(human_bytes(saved.get("bytes")))} of '
                          f'{esc(human_bytes(saved.get("saved_activations_bytes")))}</td>')
        else:
            why = (saved or {}).get("method") or "not recorded (a record from before saved_by_op)"
            totals.append(f'<td class="absent" title="{esc(why)}">not seen</td>')
    body.append(f'<tr class="total"><th>listed of saved activations</th>{"".join(totals)}</tr>')
    notes = "".join(f"<li>{esc(column)}: {esc((saved or {}).get('method') or 'not recorded')}</li>"
                    for column, saved in columns)
    return (f'<details class="saved-by-op"><summary>{esc(workload)}: saved activations by op</summary>'
            f'<table class="saved-by-op"><thead><tr><th>op that made the buffer</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><ul class="legend">{notes}</ul></details>')


def render(view):
    tables = "".join(_table(workload, view) for workload in view["workloads"])
    if not tables:
        return '<p class="none">No cell of this view lists what its forward saved by op.</p>'
    return (tables + '<p class="legend">Bytes the forward keeps for the backward, by the op that made each '
            "buffer, each buffer once (×: buffers); hover a figure for the framework's own op names; "
            "* an op with no counterpart in the op set. Measured in one more step after the measured ones.</p>")
