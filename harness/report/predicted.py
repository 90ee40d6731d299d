"""Predicted against measured: each framework's own memory prediction beside our step peak.

A section of the page with, per predictor (framework and mode), the cells compared and
the median and worst error (predicted / measured - 1), then every cell's prediction:
its state (predicted, zero, unsupported, failed), the predictor's figure, the measured
step peak it compares with, the predictor's own categories and, beside them, our
breakdown of the measured step (saved activations, gradients, temporaries). A prediction of another
program than the measured one (TensorFlow's XLA plan of a cell run without XLA) is
summarised apart and marked. Nothing here is measured by the predictor: a predicted
figure is never shown as a measured one (harness/measure/prediction.py).
"""

from harness.measure import prediction
from harness.report.fmt import esc, human_bytes, human_ratio, signed_percent


def _error(value):
    return signed_percent(value)


def _summary(records):
    rows = []
    for row in prediction.summary(records):
        other = "" if row["same_program"] else " (another program)"
        rows.append(
            f"<tr><td>{esc(row['framework'])}</td><td>{esc(row['mode'])}{esc(other)}</td>"
            f"<td>{row['cells']}</td><td>{_error(row['median_error'])}</td>"
            f"<td>{_error(row['worst_error'])} ({esc(row['worst_cell'])})</td>"
            f"<td class=\"message\">{esc(row['method'] or '')}</td></tr>"
        )
    if not rows:
        return ""
    return ("<table><thead><tr><th>framework</th><th>mode</th><th>cells</th><th>median error</th>"
            "<th>worst error</th><th>predictor</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _cell_row(record):
    found = record.get("prediction") or {}
    state = found.get("state")
    value = prediction.ratio(record)
    categories = ", ".join(f"{k} {human_bytes(v)}" for k, v in (found.get("categories") or {}).items() if v)
    detail = found.get("reason") if state != "predicted" else "; ".join(filter(None, [categories, found.get("note")]))
    mark = "" if found.get("same_program", True) else " *"
    ours = record.get("breakdown_bytes") or {}
    measured_split = ", ".join(f"{k.replace('_', ' ')} {human_bytes(ours[k])}"
                               for k in ("saved_activations", "gradients", "temporaries") if ours.get(k) is not None)
    return (
        f"<tr><td>{esc(record.get('workload'))}</td><td>{esc(record.get('framework'))}</td>"
        f"<td>{esc(record.get('mode'))}</td><td>{esc(record.get('size'))}</td><td>{esc(state)}{mark}</td>"
        f"<td>{esc(human_bytes(found.get('bytes')))}</td>"
        f"<td>{esc(human_bytes(prediction.measured_bytes(record)))}</td>"
        f"<td>{esc(human_ratio(value))}</td>"
        f'<td class="message" title="{esc(found.get("method") or "")}">{esc(detail or "")}</td>'
        f'<td class="message">{esc(measured_split)}</td></tr>'
    )


def render(records):
    """The section's HTML, or "" when no record took a prediction."""
    taken = [r for r in records if r.get("status") == "ok" and r.get("prediction")]
    if not taken:
        return ""
    cells = "".join(_cell_row(r) for r in taken)
    return (
        '<p class="meaning">A framework\'s own <b>prediction</b> of one step\'s memory, taken in the memory '
        "pass after the measured steps, against the <b>measured</b> step peak it compares with (what the "
        "step allocates above what is resident at its start). Error = predicted / measured - 1. "
        "<b>*</b>: a prediction of another program than the measured one, summarised apart. "
        "docs/predicted.md says what each predictor leaves out.</p>"
        + _summary(taken)
        + "<table><thead><tr><th>workload</th><th>framework</th><th>mode</th><th>size</th><th>prediction</th>"
        "<th>predicted</th><th>measured step peak</th><th>predicted / measured</th><th>predictor's categories, "
        "or why none</th><th>our breakdown (measured)</th></tr></thead><tbody>" + cells + "</tbody></table>"
    )
