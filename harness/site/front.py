"""The front page: the headline comparison of each committed record set, where and
when each was measured, and links to every part of the site."""

import html
from collections import OrderedDict

from harness import figures, workloads
from harness.releases import confirm, detect
from harness.report import lowest
from harness.report.fmt import human_bytes
from harness.report.records import column_rank, workload_rank
from harness.site import comparisons
from harness.site.layout import page

HEADLINE_FIGURE = "step_peak"


def _is_headline(record):
    """The plain cell of each workload and framework: eager, float32, no optimizer,
    no rematerialisation, the default backward order, the installed version."""
    return (record.get("mode") == "eager" and record.get("dtype", "float32") == "float32"
            and not record.get("optimizer") and record.get("remat") in (None, "none")
            and record.get("order") in (None, "heap") and not record.get("version")
            and record.get("batch") is None)


def headline(record_set):
    """{workload: {framework: record}} of the set's plain cells (a later record wins)."""
    grid = OrderedDict()
    for record in record_set.records:
        if _is_headline(record):
            grid.setdefault(record["workload"], {})[record["framework"]] = record
    return OrderedDict(sorted(grid.items(), key=lambda item: workload_rank(item[0])))


def _cell(record, row_lowest):
    if record is None:
        return '<td class="none">not run</td>'
    if record.get("status") != "ok":
        return (f'<td class="none" title="{html.escape(str(record.get("message") or ""))}">'
                f'{html.escape(str(record.get("status")))}</td>')
    value = figures.value(record, HEADLINE_FIGURE)
    if value is None:
        return f'<td class="none" title="{html.escape(figures.source(record).reason)}">no figure</td>'
    ratio = figures.peak_over_bound(record)
    bound = f"{ratio:.2f}× bound" if ratio is not None else "no bound"
    if figures.upper_bound(record, HEADLINE_FIGURE):
        return (f'<td class="num" title="{html.escape(figures.upper_bound_reason(record))}">'
                f'≤ {human_bytes(value)}<br><span class="meta">upper bound</span></td>')
    if lowest.marks(record, row_lowest):
        return (f'<td class="num {lowest.CSS_CLASS}" title="{lowest.MEANING}">{human_bytes(value)}<br>'
                f'<span class="meta">{bound}</span></td>')
    return f'<td class="num">{human_bytes(value)}<br><span class="meta">{bound}</span></td>'


def headline_table(record_set):
    grid = headline(record_set)
    columns = sorted({name for row in grid.values() for name in row}, key=column_rank)

    def measured(records):
        return any(r.get("status") == "ok" for r in records)

    # a framework or workload with no cell that ran (not installed on that machine, not
    # reached by the run) is named under the table, not drawn as a column of "unavailable"
    shown_columns = [c for c in columns if measured([row[c] for row in grid.values() if c in row])]
    shown_rows = {w: row for w, row in grid.items() if measured(list(row.values()))}
    if not shown_rows:
        return '<p class="meta">No eager float32 cell of this set ran: see its comparison page.</p>'
    head = "".join(f"<th>{html.escape(name)}</th>" for name in shown_columns)
    rows = []
    for workload, row in shown_rows.items():
        row_lowest = lowest.of_row([row.get(c) for c in shown_columns])  # the comparison page's rule
        rows.append(f"<tr><th>{html.escape(workload)}</th>"
                    + "".join(_cell(row.get(c), row_lowest) for c in shown_columns) + "</tr>")
    notes = []
    left_columns = [c for c in columns if c not in shown_columns]
    if left_columns:
        notes.append(f"no cell ran in {', '.join(left_columns)} (not installed where this set was measured)")
    left_rows = [w for w in grid if w not in shown_rows]
    if left_rows:
        notes.append(f"no cell of {', '.join(left_rows)} ran in this set")
    unrecorded = [w for w in workloads.NAMES if w not in grid]
    if unrecorded:
        notes.append(f"no record of {', '.join(unrecorded)} (the run did not reach them)")
    note = f'<p class="meta">{html.escape("; ".join(notes))}.</p>' if notes else ""
    return (f'<table class="headline"><thead><tr><th>workload</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>{note}')


def _provenance(record_set):
    found = comparisons.summary(record_set)
    versions = ", ".join(f"{name} {'/'.join(v)}" for name, v in found["versions"].items())
    cells = ", ".join(f"{n} {status}" for status, n in sorted(found["cells"].items()))
    if found["superseded"]:
        cells += f" (each cell's newest record; {found['superseded']} older record(s) of cells measured again)"
    items = [
        ("measured", found["when"] or "unknown"),
        ("machine", "; ".join(found["gpu"] + found["machine"]) or "unknown"),
        ("Python", ", ".join(found["python"]) or "unknown"),
        ("versions", versions or "unknown"),
        ("gradmem commit", ", ".join(found["commits"]) or "unknown"),
        ("cells", cells),
        ("records", ", ".join(record_set.files)),
        ("refresh", comparisons.REFRESH[record_set.device].format(size=record_set.size)),
    ]
    return "<table class=\"meta\">" + "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in items) + "</table>"


def render(record_sets, missing, releases, history, serve=""):
    """The front page's HTML.

    record_sets: [RecordSet] with pages; missing: [(name, why)] of sets not committed;
    releases: [(framework, tally, href)] (site.releases.write); history: (href or None, text);
    serve: how to open the history (site.history.serve_note), said where it is linked.
    """
    parts = ["<h1>gradmem observatory</h1>",
             '<p>Everything gradmem has measured, from what the repository holds: the comparison of '
             'autodiff frameworks on the same workloads, what changed between their releases and why, '
             'the public reports the workloads come from, the CUDA figures and the history per commit. '
             'Every page opens from disk; nothing is loaded from elsewhere.</p>',
             f'<p class="meta">The headline figure: <strong>step peak</strong>, {html.escape(figures.get(HEADLINE_FIGURE).meaning)} '
             '(host RSS on CPU, the device allocator on CUDA), eager mode, float32; under it the peak '
             f'against the bytes the math requires (the workload\'s bound), a number, not a colour. Green: '
             f'{lowest.MEANING}, exact figures only, as on each comparison page. "≤": an upper bound (an '
             'allocator that cannot reset its peak), never marked. '
             'CPU and CUDA figures come from different meters and are never compared with each other.</p>',
             '<h2 id="comparisons">Comparisons</h2>']
    for record_set in record_sets:
        parts.append(f'<h3 id="{record_set.name}">{record_set.device.upper()}, size {html.escape(record_set.size)} '
                     f'· <a href="{record_set.folder}/index.html">full comparison page</a> '
                     f'· <a href="{record_set.folder}/records.jsonl">records</a></h3>')
        parts.append(headline_table(record_set))
        parts.append(_provenance(record_set))
    for name, why in missing:
        parts.append(f'<h3>{html.escape(name)}</h3><p class="note">{html.escape(why)}</p>')

    parts.append('<h2 id="releases">Releases</h2>')
    def total(key):
        return sum(tally[key] for _, tally, _ in releases)

    parts.append(f'<p><strong>{total("confirmed")} changes between consecutive releases held when measured '
                 f'again side by side</strong>, {total("actionable")} of them by at least '
                 f'{confirm.ACT_RELATIVE:.0%} and {confirm.ACT_BYTES // detect.MIB} MiB (a change a user would act on). '
                 f'The sweeps flagged {total("flagged")} (a move beyond the pair\'s run-to-run band): '
                 f'{total("not confirmed")} did not hold side by side, {total("pending")} are not measured side by '
                 f'side yet, {total("advisory")} are time (advisory). '
                 '<a href="releases/index.html">All of them, confirmed first</a>.</p><div class="cards">')
    for framework, tally, href in releases:
        parts.append(f'<div class="card"><h3><a href="{href}">{html.escape(framework)}</a></h3>'
                     f'<p class="meta">{tally["confirmed"]} confirmed ({tally["actionable"]} to act on) · '
                     f'{tally["flagged"]} flagged, {tally["pending"]} not yet measured side by side</p></div>')
    parts.append("</div>")

    parts.append('<h2 id="reports">Reports</h2><ul>'
                 '<li><a href="seeds.html">The seed reports</a>: each public report a workload comes from, '
                 'its claim, the command that measures it today, the figures and the verdict.</li>'
                 '<li><a href="gpu.html">CUDA figures</a>: how gradmem measures on a GPU and what the '
                 'GPU runs showed.</li></ul>')

    href, text = history
    parts.append('<h2 id="history">History per commit</h2>')
    if href:
        parts.append(f'<p><a href="{href}">The asv history site</a> (over HTTP only, see below): '
                     f'{html.escape(text)}</p><p class="note">{html.escape(serve)}</p>')
    else:
        parts.append(f'<p class="note">{html.escape(text)}</p>')
    return page("gradmem observatory", "\n".join(parts))
