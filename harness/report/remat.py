"""The checkpointing table: does rematerialisation lower the peak, and what does it cost?

For each view (size, dtype, device, mode, optimizer), workload and framework: the
steady-state peak without remat, then for each strategy that ran its peak, the change
against no remat, the extra time per step (the recompute), and a verdict. "lowered"
needs a drop of at least DROP (memory figures repeat within 1 %, so a smaller change
is noise); a strategy that raised the peak says so (torch's non-reentrant checkpoint
and TF's recompute_grad have been reported to do that).
"""

from harness import figures
from harness.report import records as rec
from harness.report.fmt import esc, human_bytes, human_seconds, signed_percent

DROP = 0.02


def verdict(peak, baseline):
    if peak <= baseline * (1 - DROP):
        return "lowered"
    if peak >= baseline * (1 + DROP):
        return "raised"
    return "unchanged"


def _strategies(records):
    names = sorted({r.get("remat") for r in records if r.get("remat") not in (None, "none")})
    return names


def _index(records):
    """{(view, workload, framework, order) -> {remat: record}}, later records winning."""
    table = {}
    for record in records:
        key = (rec.view_key(record), record["workload"], record["framework"], record.get("order"))
        table.setdefault(key, {})[record.get("remat") or "none"] = record
    return table


def _cell(record, baseline):
    if record is None:
        return '<td class="absent">–</td>'
    if record.get("status") != "ok":
        status = esc(record.get("status"))
        return f'<td class="status-{status}" title="{esc(record.get("message"))}">{status}</td>'
    peak = figures.value(record, "step_peak")
    text = f'<span class="peak">{esc(human_bytes(peak))}</span>'
    if baseline is not None and baseline.get("status") == "ok":
        base_peak = figures.value(baseline, "step_peak")
        change = (peak - base_peak) / base_peak
        kind = verdict(peak, base_peak)
        extra = figures.value(record, "time") - figures.value(baseline, "time")
        noisy = " ~ noisy" if record.get("time_noisy") or baseline.get("time_noisy") else ""
        return (
            f'<td class="remat-{kind}">{text}<br><span class="ratio">{signed_percent(change, 0)} · {kind}</span>'
            f'<br><span class="time">recompute {esc(human_seconds(extra))}/step{noisy}</span></td>'
        )
    return f"<td>{text}</td>"


def render(records):
    """The section's HTML, or "" when no record used a remat strategy."""
    strategies = _strategies(records)
    if not strategies:
        return ""
    table = _index(records)
    keys = sorted(
        (k for k, by in table.items() if any(s in by for s in strategies)),
        key=lambda k: (rec.view_rank(k[0]), rec.workload_rank(k[1]), rec.column_rank(k[2]), str(k[3])),
    )
    head = "".join(f"<th>{esc(s)}</th>" for s in strategies)
    rows = []
    for view, workload, framework, order in keys:
        by = table[(view, workload, framework, order)]
        baseline = by.get("none")
        name = framework if order in (None, "heap") else f"{framework} (order={order})"
        cells = _cell(baseline, None) + "".join(_cell(by.get(s), baseline) for s in strategies)
        rows.append(
            f"<tr><td>{esc(rec.view_title(view))}</td><th>{esc(workload)}</th><th>{esc(name)}</th>{cells}</tr>"
        )
    return (
        '<table class="remat"><thead><tr><th>view</th><th>workload</th><th>framework</th>'
        f"<th>no remat</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="legend">Steady-state peak above baseline; the change against no remat '
        f"(lowered / raised: by at least {DROP:.0%}, memory repeats within 1 %) and the extra "
        "time per step that the recompute costs (median; noisy on a shared machine). "
        "– : not run; a status: the strategy could not run there (hover for why).</p>"
    )
