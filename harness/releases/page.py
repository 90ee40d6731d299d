"""The release page of one framework: each workload's figures against the release, changes marked.

One self-contained HTML file (the comparison page's CSS, inline SVG, no scripts, no
external resource), opening from disk. Per workload and mode, one small chart per
figure: every round's sample as a dot, the median as a line, the releases in order on
the x axis (evenly spaced: a release is a step, not a date); a release that introduced
a change is marked by a red ring and a dashed line, its entry listed below the charts
with its evidence (the samples, the band it exceeded, the part that moved, the command
that shows it). A flagged change is red only when the side-by-side re-measure
(confirm.py) held it, grey while not measured so, and not marked when it was rejected;
the list leads with the confirmed changes a user would act on, the rest folded.
Releases whose NumPy/SciPy differ from the pinned ones are marked *.

The growth per step (detect.GROWTH) is drawn from the store's records where they carry
it and from its leak-only pass's (leak_pass.py), that figure alone; a mark above each
release on its chart gives its rounds' leak verdict (VERDICT_MARKS).
"""

import statistics

from harness.releases import confirm, detect, store
from harness.report import svg
from harness.report.fmt import esc, human_bytes, human_seconds, signed_percent
from harness.report.page import CSS
from harness.versions import index

EXTRA_CSS = """
svg circle.sample { fill: #4c78a8; opacity: .55; } svg polyline.median { fill: none; stroke: #4c78a8; stroke-width: 1.5; }
svg circle.change { fill: none; stroke: #d62728; stroke-width: 2; } svg line.change { stroke: #d62728; stroke-dasharray: 3 2; }
svg circle.advisory { stroke: #a35a00; } svg line.advisory { stroke: #a35a00; }
svg circle.flagged { fill: none; stroke: #999; stroke-width: 1.5; stroke-dasharray: 2 2; } svg line.flagged { stroke: #bbb; stroke-dasharray: 3 2; }
ul.actionable li { margin: .2em 0; } details { margin: .6em 0; } details summary { cursor: pointer; font-weight: 600; }
svg text.unavailable { fill: #999; }
svg text.verdict { font-size: 9px; fill: #888; } svg text.verdict.grows { fill: #d62728; } svg text.verdict.settles { fill: #a35a00; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } tr.differs td.release { background: #fff1c2; }
.change-up { color: #b00; } .change-down { color: #070; } .advisory-row { color: #8a5a00; }
"""
W, H, LEFT, BOTTOM, TOP, PAD = 300, 150, 58, 44, 22, 8
#: the mark of a release's leak verdict on the growth-per-step chart (figures.leak_verdict);
#: "mixed": its rounds disagree
VERDICT_MARKS = {"grows": "▲", "settles": "◆", "flat": "○", "inconclusive": "?", "mixed": "±"}


def render(framework, records, document, env_info, meta, upstream=None, leak=(), swept_again=None):
    """The page; `upstream`: the standalone outcomes (harness/upstream/store.py,
    FRAMEWORK.upstream.json), said beside each actionable change's line and counted;
    `leak`: the leak-only pass's records (FRAMEWORK.leak.jsonl), read for the growth per
    step and its verdicts alone; `swept_again`: store.measured_again of the withdrawn
    sweep records, said in each such release's row."""
    releases = sorted({r.get("version") for r in records if r.get("version")}, key=index.sort_key)
    changes = document["changes"]
    modes = sorted({r["mode"] for r in records})
    workloads_ = sorted({r["workload"] for r in records})
    samples = detect.series(records, leak)
    judged = list(records) + list(leak)
    starred = {v for v, info in env_info.items() if (info or {}).get("dependency_differs")}
    sections, once, shown = [], [], []
    for workload in workloads_:
        for mode in modes:
            measured = {r for f in detect.FIGURES for r in samples.get((workload, mode, f), {})}
            if len(measured) < 2:  # nothing to compare: named under the charts, not drawn
                if measured:
                    once.append(f"{workload} {mode} ({', '.join(sorted(measured))})")
                continue
            # a figure the cell does not have (compiled: no forward/backward split) is not drawn
            charts = [_chart(workload, mode, figure, releases, samples[(workload, mode, figure)], changes, starred,
                             verdicts={release: detect.verdicts(judged, workload, mode, release) for release in releases}
                             if figure == detect.GROWTH else None)
                      for figure in detect.FIGURES if samples.get((workload, mode, figure))]
            shown.append(f"{workload}-{mode}")
            sections.append(f'<section id="{esc(workload)}-{esc(mode)}"><h3>{esc(workload)} · {esc(mode)}</h3>'
                            f'<div class="charts">{"".join(charts)}</div></section>')
    if once:
        sections.append(f'<p class="legend">Measured at one release only (nothing to compare): {esc("; ".join(once))}.</p>')
    nav = "".join(f'<a href="#{esc(key)}">{esc(key)}</a>' for key in shown)
    title = f"gradmem: {framework} release by release"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{esc(title)}</title><style>{CSS}{EXTRA_CSS}</style></head>
<body><h1>{esc(title)}</h1>
{_intro(framework, records, releases, document, meta)}{_leak_intro(leak, samples)}
<nav>{nav}<a href="#changes">changes</a><a href="#flat">flat</a><a href="#releases">releases</a></nav>
<h2>Figures against the release</h2>{''.join(sections)}
<section id="changes"><h2>Changes</h2>{_confirmed_first(document, upstream)}</section>
<section id="flat"><h2>What stayed flat</h2>{_flat(document)}</section>
<section id="releases"><h2>Releases and their environments</h2>{_releases(releases, records, env_info, meta, swept_again or {})}</section>
</body></html>
"""


def _intro(framework, records, releases, document, meta):
    grid = meta.get("grid") or {}
    ok = sum(1 for r in records if r.get("status") == "ok")
    meaning = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in document["meaning"].items())
    yanked = meta.get("yanked") or {}
    skipped = f" Skipped as yanked: {esc(', '.join(yanked))}." if yanked else ""
    repeats = grid.get("repeats", "?")
    # a store swept with fewer rounds than the command's default says so, so the page and
    # the README (which gives the default) do not seem to disagree
    chosen = (f" (<code>harness releases --repeats {esc(repeats)}</code>; the default is {store.DEFAULT_ROUNDS})"
              if isinstance(repeats, int) and repeats != store.DEFAULT_ROUNDS else "")
    return (
        f'<p class="meaning">{len(releases)} releases of {esc(framework)}, {len(records)} records ({ok} ok), '
        f'size {esc(grid.get("size", "?"))} {esc(grid.get("dtype", ""))} on CPU, {esc(repeats)} rounds '
        f"per release{chosen} (each cell a fresh worker per pass, as <code>harness run</code>).{skipped} "
        f"Memory figures are bytes above a baseline taken in the worker (docs/measurement.md); "
        f"a dot is one round, the line joins the medians.</p>"
        f'<p class="meaning">{esc(document["rule"])}. Releases marked * ran with other NumPy/SciPy than the pinned '
        f"ones (they do not load with them): a move next to one may be the dependency's.</p>"
        f'<ul class="meaning legend">{meaning}</ul>'
    )


def _leak_intro(leak, samples):
    """What the growth per step is drawn from, and its marks ('' where no series has it)."""
    if not any(figure == detect.GROWTH for _, _, figure in samples):
        return ""
    marks = ", ".join(f"{mark} {verdict}" for verdict, mark in VERDICT_MARKS.items() if verdict != "mixed")
    said = (f'<p class="meaning legend">On the growth-per-step charts (<b>{esc(detect.GROWTH)}</b>) the mark above '
            f'each release is its rounds\' leak verdict: {esc(marks)}; {VERDICT_MARKS["mixed"]} where its rounds '
            f'disagree (hover for each).')
    if leak:
        rounds = sorted({r.get(store.ROUND_KEY) for r in leak if r.get(store.ROUND_KEY)})
        said += (f" Measured by a leak-only pass (<code>harness releases --leak-pass</code>): {len(leak)} memory "
                 f"passes, {len(rounds)} round(s) a cell, the growth per step alone read from them (their other "
                 f"figures, measured by a newer gradmem, are not the sweep's).")
    return said + "</p>"


def verdict_mark(found):
    """(mark, words) of a release's leak verdicts `found` (one per round), or None."""
    if not found:
        return None
    kind = found[0] if len(set(found)) == 1 else "mixed"
    return VERDICT_MARKS.get(kind, VERDICT_MARKS["mixed"]), kind


def _chart(workload, mode, figure, releases, by_release, changes, starred=(), verdicts=None):
    unit = detect.FIGURES[figure]
    values = [v for vs in by_release.values() for v in vs]
    top = max(values) if values else 1.0
    top = top * 1.08 if top > 0 else 1.0
    width = max(W, LEFT + 8 + 2 * PAD + 14 * len(releases))  # room for each release's label
    plot_w, plot_h = width - LEFT - 8, H - TOP - BOTTOM
    inner = plot_w - 2 * PAD  # the first and last releases' dots clear the axes
    step = inner / max(len(releases) - 1, 1)

    def x(i):
        return LEFT + PAD + (i * step if len(releases) > 1 else inner / 2)

    def y(v):
        return TOP + plot_h - (v / top) * plot_h

    label = human_seconds if unit == "seconds" else human_bytes
    parts = [svg.text(0, 12, figure, cls="title"),
             svg.line(LEFT, TOP, LEFT, TOP + plot_h, "axis"), svg.line(LEFT, TOP + plot_h, width - 8, TOP + plot_h, "axis"),
             svg.text(LEFT - 4, TOP + 4, label(top), anchor="end", cls="small"),
             svg.text(LEFT - 4, TOP + plot_h, "0", anchor="end", cls="small")]
    medians = []
    for i, release in enumerate(releases):
        found = by_release.get(release)
        parts.append(f'<text x="{x(i):.1f}" y="{TOP + plot_h + 8:.1f}" class="small" text-anchor="end" '
                     f'transform="rotate(-55 {x(i):.1f} {TOP + plot_h + 8:.1f})">{esc(release)}{" *" if release in starred else ""}</text>')
        marked = verdict_mark((verdicts or {}).get(release))
        if marked:  # the leak verdict of its rounds, above the plot
            mark, kind = marked
            parts.append(f'<text x="{x(i):.1f}" y="{TOP - 3:.1f}" text-anchor="middle" class="verdict {kind}">'
                         f'{esc(mark)}<title>{esc(release)}: {esc(", ".join(verdicts[release]))}</title></text>')
        if not found:
            parts.append(svg.text(x(i), TOP + plot_h - 3, "×", anchor="middle", cls="small unavailable"))
            continue
        for v in found:
            parts.append(f'<circle class="sample" cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.2">'
                         f"<title>{esc(release)}: {esc(label(v))}</title></circle>")
        medians.append((x(i), y(statistics.median(found))))
    if len(medians) > 1:
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in medians)
        parts.append(f'<polyline class="median" points="{points}"/>')
    for c in changes:
        if (c["workload"], c["mode"], c["figure"]) != (workload, mode, figure) or c["release"] not in releases:
            continue
        status = (c.get("confirmation") or {}).get("status", "pending")
        if status == "not confirmed":  # the side-by-side run rejected it: nothing to mark
            continue
        i = releases.index(c["release"])
        # a confirmed change in red; one not (yet) measured side by side in grey, time in orange
        cls = "change advisory" if c["advisory"] else "change" if status == "confirmed" else "flagged"
        tip = f"{c['before_release']} -> {c['release']}: {label(c['before'])} -> {label(c['after'])}, band {label(c['band'])}"
        parts.append(svg.line(x(i) - step / 2, TOP, x(i) - step / 2, TOP + plot_h, cls, tip))
        parts.append(f'<circle class="{cls}" cx="{x(i):.1f}" cy="{y(c["after"]):.1f}" r="6"><title>{esc(tip)}</title></circle>')
    return svg.svg(width, H, "".join(parts), f"{workload} {mode} {figure} against the {len(releases)} releases")


FOLDED = (
    ("confirmed", "Other confirmed changes (held side by side, under the size rule)"),
    ("not confirmed", "Not confirmed: flagged by the sweep's rounds, not held side by side"),
    ("pending", "Flagged, not measured side by side yet (harness releases --confirm)"),
    ("failed", "Flagged, the side-by-side run could not measure them"),
    ("advisory", "Time (advisory: measured on a shared machine, never confirmed)"),
)


def _confirmed_first(document, upstream=None):
    """The confirmed changes a user would act on, one line each (its id, and whether a
    standalone script reproduced it); everything else folded."""
    from harness.upstream import ids, store as upstream_store  # the page's one reader of the outcomes

    changes = document["changes"]
    if not changes:
        return '<p class="none">No figure moved between consecutive releases by more than its run-to-run band.</p>'
    groups = confirm.by_status(changes)
    tally = (document.get("tally") or {}).get("all") or {}
    rule = document.get("confirmation_rule", confirm.RULE)
    head = (f'<p class="meaning">The sweep\'s rounds flagged {len(changes) - len(groups["advisory"])} memory '
            f'change(s) (and {len(groups["advisory"])} of time, advisory); measured again side by side, '
            f'{tally.get("confirmed", 0)} held ({tally.get("actionable", 0)} by at least '
            f'{confirm.ACT_RELATIVE:.0%} and {confirm.ACT_BYTES // detect.MIB} MiB), {tally.get("not confirmed", 0)} did '
            f'not, {tally.get("pending", 0)} are not measured side by side yet'
            + (f', {tally["failed"]} could not be measured' if tally.get("failed") else "")
            + f'. {esc(rule[:1].upper() + rule[1:])}. Both runs\' figures are shown: the sweep\'s rounds and the '
            f'side-by-side pairs.</p>')
    lines = confirm.lead_lines(groups["actionable"])
    outcomes = (upstream or {}).get("changes") or {}
    framework = document.get("framework", "")

    def standalone(c):
        words = upstream_store.label(outcomes.get(ids.of(framework, c)))
        return f' · <b class="standalone">{esc(words)}</b>' if words else ""

    lead = "".join(
        f'<li class="change-{c["direction"]}" id="{esc(ids.slug(ids.of(framework, c)))}">{esc(text)}{standalone(c)}'
        f'<br><code>{esc(ids.of(framework, c))}</code> · <code>{esc(c["command"] or "")}</code></li>'
        for text, c in lines)
    counted = upstream_store.tally(document, upstream or {})
    reproduced = (f'<p class="meaning">Standalone (<code>harness report-change</code>: the step in plain '
                  f'{esc(framework)} code and a probe of the same figures, run under both releases with nothing of '
                  f'gradmem installed): {counted["run"]} of the {counted["actionable"]} actionable figures run, '
                  f'{counted["reproduced"]} reproduced standalone, {counted["harness only"]} harness only'
                  + (f' ({counted["loss form"]} of them the loss\'s form: reproduced with the loss written as gradmem '
                     f'runs it, each op a small function or through an op table)' if counted["loss form"] else "")
                  + (f', {counted["not reproduced here"]} not reproduced here (by gradmem\'s own pass either)'
                     if counted["not reproduced here"] else "")
                  + (f', {counted["failed"]} failed' if counted["failed"] else "")
                  + (f', {counted["unavailable"]} could not be run (an environment)' if counted["unavailable"] else "")
                  + ".</p>") if counted["run"] else ""
    lead = (f'<h3>Confirmed changes a user would act on ({len(lines)})</h3>' + reproduced
            + (f'<ul class="actionable">{lead}</ul>' if lead else '<p class="none">None confirmed yet.</p>'))
    folded = "".join(
        f'<details><summary>{esc(title)} ({len(groups[status])})</summary>{_changes(groups[status])}</details>'
        for status, title in FOLDED if groups[status])
    return head + lead + folded


def _side_by_side(c):
    """The confirmation's figures of one change, or why there are none."""
    found = c.get("confirmation") or {}
    if "before" not in found:
        return esc(found.get("why", "not measured side by side"))
    label = detect.fmt
    rel = f" ({signed_percent(found['relative'])})" if found.get("relative") is not None else ""
    samples = (", ".join(label(c["figure"], v) for v in found["before_samples"]) + " → "
               + ", ".join(label(c["figure"], v) for v in found["after_samples"]))
    why = f"<br>{esc(found['why'])}" if found.get("why") else ""
    why += f"<br>gradmem {esc(', '.join(found['gradmem']))}" if found.get("gradmem") else ""
    why += f"<br>{esc(confirm.machines_note(found))}" if found.get("machines") else ""
    return (f'<b>{esc(found["status"])}</b>{esc(confirm.across_note(found))}: {esc(label(c["figure"], found["before"]))} → '
            f'{esc(label(c["figure"], found["after"]))}{esc(rel)}, {found["pairs"]} pairs, p = {found["p"]:.3g}'
            f'{why}<br><span class="small">{esc(samples)}</span>')


def _changes(changes):
    rows = []
    for c in changes:
        label = detect.fmt
        rel = signed_percent(c["relative"]) if c["relative"] is not None else "–"
        part = (c.get("parts") or {}).get("moved", "")
        phases = ", ".join(f"{k} {v / detect.MIB:+.2f} MiB" for k, v in ((c.get("parts") or {}).get("phase") or {}).items())
        deps = "; ".join(f"{d} {a} → {b}" for d, (a, b) in c["dependencies_differ"].items())
        samples = (", ".join(label(c["figure"], v) for v in c["before_samples"]) + " → "
                   + ", ".join(label(c["figure"], v) for v in c["after_samples"]))
        klass = "advisory-row" if c["advisory"] else ""
        rows.append(
            f'<tr class="{klass}"><td>{esc(c["workload"])}</td><td>{esc(c["mode"])}</td><td>{esc(c["figure"])}'
            f'{" (advisory)" if c["advisory"] else ""}</td><td>{esc(c["before_release"])} → <b>{esc(c["release"])}</b>'
            f'{esc(detect.gap_note(c))}</td>'
            f'<td class="num change-{c["direction"]}">{esc(label(c["figure"], c["before"]))} → '
            f'{esc(label(c["figure"], c["after"]))} ({esc(rel)})</td><td class="num">{esc(label(c["figure"], c["band"]))}</td>'
            f'<td class="message">{esc(samples)}</td><td class="message">{_side_by_side(c)}</td>'
            f'<td class="message">{esc(phases)}<br>{esc(part)}</td>'
            f'<td class="message">{esc(deps) or "same"}</td><td class="message"><code>{esc(c["command"] or "a prediction: the records of each release show it")}</code>'
            + (f'<br><code>{esc(c["commit_command"])}</code>' if c.get("commit_command") else "")
            + _commit_found(c["figure"], c.get("commit_search")) + "</td></tr>"
        )
    return ("<table><thead><tr><th>workload</th><th>mode</th><th>figure</th><th>release</th><th>median before → after</th>"
            "<th>band exceeded</th><th>sweep rounds</th><th>side by side (A B A B ...)</th><th>what moved (phases; largest part)</th><th>dependencies that differ</th>"
            "<th>command that shows it</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _commit_found(figure, search):
    """What stage 2 found for this change: the commit (with both figures), or why none."""
    if not search:
        return ""
    figures = " → ".join("–" if v is None else detect.fmt(figure, v) for v in (search.get("good_figure"), search.get("bad_figure")))
    if search.get("kind") == "culprit":
        said = (f'stage 2: first bad commit <b>{esc(search["first_bad"])}</b> (last good {esc(search.get("last_good", ""))}; '
                f'{esc(figures)}, {search.get("probes")} measurements'
                + ("" if search.get("confirmed") else ", boundary not confirmed") + ")")
    elif search.get("kind") == "range":
        said = f'stage 2: the step lies in commits that could not be measured: {esc(", ".join(search.get("suspects") or []))}'
    else:
        said = f'stage 2: the two tags do not differ beyond the threshold ({esc(figures)})'
    return f'<br><span class="commit">{said}</span><br><code>{esc(search.get("command", ""))}</code>'


def _flat(document):
    flat = document["flat"]
    if not flat:
        return '<p class="none">No series was judged flat.</p>'
    by_figure = {}
    for item in flat:
        by_figure.setdefault(item["figure"], []).append(item)
    rows = "".join(
        f"<tr><td>{esc(f)}</td><td>{len(items)}</td><td class='message'>"
        + esc(", ".join(f"{i['workload']} {i['mode']}" for i in items)) + "</td><td class='num'>"
        + f"{max(i['largest_move_over_band'] for i in items):.2f}</td></tr>"
        for f, items in by_figure.items()
    )
    return ("<table><thead><tr><th>figure</th><th>flat series</th><th>which</th><th>largest move / band</th></tr></thead>"
            f"<tbody>{rows}</tbody></table><p class='legend'>{document['unjudged_pairs']} release pair(s) not judged "
            "(fewer than 2 rounds on a side).</p>")


def _disk(info):
    """An environment's disk, and in brackets what it does not share with the
    framework's other environments (hard links, harness/versions/shared_files.py)."""
    total, shared = info.get("disk_bytes"), info.get("shared_bytes")
    if total is None or not shared:
        return human_bytes(total)
    return f"{human_bytes(total)} ({human_bytes(max(total - shared, 0))})"


def _releases(releases, records, env_info, meta, swept_again):
    uploaded = meta.get("uploaded") or {}
    # the Python most releases ran with; another one is named in its row (the source the
    # detector's "python differs" reads too)
    python_of = store.release_pythons(records, env_info)
    pythons = [tuple(python_of[r].split(".")[:2]) for r in releases if python_of.get(r)]
    usual_python = list(max(set(pythons), key=pythons.count)) if pythons else None
    rows = []
    for release in releases:
        mine = [r for r in records if r.get("version") == release]
        info = env_info.get(release) or {}
        versions = info.get("versions") or {}
        differs = info.get("dependency_differs") or {}
        counts = {}
        for r in mine:
            counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
        status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        status += confirm.again_words(swept_again.get(release), "records")
        reason = info.get("unavailable") or next((r.get("message") for r in mine if r.get("status") != "ok"), "")
        deps = ", ".join(f"{d} {versions[d]}" for d in ("numpy", "scipy", "jaxlib") if versions.get(d))
        if python_of.get(release) and python_of[release].split(".")[:2] != usual_python:  # interpreters.py chose another
            deps = f"Python {python_of[release]}, {deps}"
        rows.append(
            f'<tr class="{"differs" if differs else ""}"><td class="release">{esc(release)}{" *" if differs else ""}</td>'
            f"<td>{esc(uploaded.get(release, ''))}</td><td>{esc(deps)}</td>"
            f'<td class="num">{esc(_disk(info))}</td>'
            f'<td class="num">{esc(info.get("build_s", "cached"))}</td><td class="num">{esc(info.get("measure_s", "–"))}</td>'
            f'<td>{esc(status)}</td><td class="message">{esc(str(reason)[:300])}'
            + (f"<br>{esc(info.get('era_reason') or '')}" if differs else "") + "</td></tr>"
        )
    wall = meta.get("last_sweep_wall_s")
    return (("<p>" + f"Wall time of the last invocation: {wall:.0f} s (a resumed sweep counts only its own part; docs/releases.md has the whole sweep's)." + "</p>") if wall else "") + (
        "<table><thead><tr><th>release</th><th>uploaded</th><th>environment</th><th title=\"in brackets: what this environment does not share with the other environments of its framework (hard links)\">disk (own)</th><th>build s</th>"
        "<th>measure s</th><th>records</th><th>why not ok / why another NumPy</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>")
