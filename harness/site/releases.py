"""The releases overview: every change the release sweeps found, across frameworks,
newest first, with the commit stage 2 named where it found one; each framework's own
page (releases/NAME.html, written by `harness releases`) copied beside it; and a diff
page per pair of releases a change lies between (`harness diff` of the two cells: the
categories, the ops and the environment that moved).

Reads releases/NAME.changes.json (the changes), NAME.sweep.json (the releases' upload
dates and the sweep's size), NAME.commits.json (stage 2's commit searches) and
NAME.jsonl (each release's rounds, for the diff pages).
"""

import glob
import html
import json
import os
import re
import shutil

from harness import figures
from harness.diff import compare, select
from harness.diff import page as diff_page
from harness.releases import confirm, detect
from harness.report.fmt import signed_percent
from harness.report.records import load as load_records
from harness.site.layout import page, with_home_link


def _read(path, default):
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _metric(command):
    """The bisect metric a change's command names (--metric X), or None."""
    found = re.search(r"--metric\s+(\S+)", command or "")
    return found.group(1) if found else None


def _commit_searches(framework, commits):
    """{(workload, mode, metric, before, after): search} of NAME.commits.json."""
    out = {}
    for search in commits:
        pair = tuple(search.get("releases") or ())
        if search.get("framework", framework) == framework and len(pair) == 2:
            out[(search.get("workload"), search.get("mode"), search.get("metric")) + pair] = search
    return out


def load(releases_dir):
    """[(framework, [change with "framework", "size", "uploaded", "search", "order"])] per
    framework that has a changes file, frameworks in name order."""
    out = []
    for path in sorted(glob.glob(os.path.join(releases_dir, "*.changes.json"))):
        framework = os.path.basename(path)[: -len(".changes.json")]
        document = _read(path, {})
        sweep = _read(os.path.join(releases_dir, f"{framework}.sweep.json"), {})
        searches = _commit_searches(framework, _read(os.path.join(releases_dir, f"{framework}.commits.json"), []))
        order = {release: i for i, release in enumerate(sweep.get("releases") or [])}
        uploaded = sweep.get("uploaded") or {}
        size = (sweep.get("grid") or {}).get("size", "?")
        changes = []
        for change in document.get("changes") or []:
            key = (change["workload"], change["mode"], _metric(change.get("command")),
                   change["before_release"], change["release"])
            changes.append(dict(change, framework=framework, size=change.get("size", size),
                                uploaded=uploaded.get(change["release"], ""),
                                order=order.get(change["release"], -1),
                                search=change.get("commit_search") or searches.get(key)))
        out.append((framework, changes))
    return out


def newest_first(per_framework):
    """Every change, the release uploaded last first (then framework, workload, figure)."""
    everything = [change for _, changes in per_framework for change in changes]
    everything.sort(key=lambda c: (c["workload"], c["mode"], c["figure"]))
    everything.sort(key=lambda c: c["framework"])
    return sorted(everything, key=lambda c: (c["uploaded"], c["order"]), reverse=True)


def _median_round(rounds):
    """The round whose step peak is the median of the ok rounds (the lower middle of an
    even count), and its place: (record, k, n), or None when no round is ok."""
    ok = [r for r in rounds if r.get("status") == "ok"]
    if not ok:
        return None
    ranked = sorted(ok, key=lambda r: (figures.value(r, "step_peak") is None, figures.value(r, "step_peak") or 0))
    chosen = ranked[(len(ranked) - 1) // 2]
    return chosen, rounds.index(chosen) + 1, len(rounds)


def write_diffs(releases_dir, per_framework, out_dir):
    """releases/diff/FRAMEWORK-WORKLOAD-MODE-A-B.html per pair of releases a change lies
    between; returns {(framework, workload, mode, A, B): href from releases/}."""
    written = {}
    for framework, changes in per_framework:
        path = os.path.join(releases_dir, f"{framework}.jsonl")
        if not changes or not os.path.exists(path):
            continue
        rounds = {}
        for record in load_records([path]):
            rounds.setdefault((record["workload"], record["mode"], record.get("version")), []).append(record)
        for change in changes:
            key = (framework, change["workload"], change["mode"], change["before_release"], change["release"])
            if key in written:
                continue
            a = _median_round(rounds.get((key[1], key[2], key[3]), []))
            b = _median_round(rounds.get((key[1], key[2], key[4]), []))
            if a is None or b is None:
                continue
            labels = tuple(f"{framework} {release} ({select.label(found[0])}; round {found[1]} of {found[2]}, "
                           "the median by step peak)" for release, found in ((key[3], a), (key[4], b)))
            name = re.sub(r"[^\w.+-]", "_", "-".join(key)) + ".html"
            target = os.path.join(out_dir, "releases", "diff", name)
            diff_page.write(target, compare.build(a[0], b[0], labels))
            with_home_link(target, depth=2)
            written[key] = f"diff/{name}"
    return written


def _commit(search):
    if not search:
        return '<td class="none">–</td>'
    if search.get("kind") == "culprit":
        said = "confirmed" if search.get("confirmed") else "boundary not confirmed"
        return (f'<td><code>{html.escape(str(search.get("first_bad", "")))}</code>'
                f'<br><span class="meta">first bad commit, {said}</span></td>')
    if search.get("kind") == "range":
        return f'<td>in {html.escape(", ".join(search.get("suspects") or []))}<br><span class="meta">unmeasurable commits</span></td>'
    return '<td class="none">the tags do not differ beyond the threshold</td>'


def _why(change, diffs):
    key = (change["framework"], change["workload"], change["mode"], change["before_release"], change["release"])
    href = diffs.get(key)
    return f'<td><a href="{html.escape(href)}">diff</a></td>' if href else '<td class="none">–</td>'


def _confirmation(change):
    """The change measured again side by side (`harness releases --confirm`): its status,
    the move side by side, the test's p and pairs, and why, as far as the record says."""
    found = change.get("confirmation")
    if found is None:
        return '<td class="none">–</td>'
    if not isinstance(found, dict):
        return f"<td>{html.escape(str(found))}</td>"
    details = []
    if isinstance(found.get("relative"), (int, float)):
        details.append(f"{signed_percent(found['relative'])} side by side")
    if isinstance(found.get("p"), (int, float)):
        details.append(f"p {found['p']:.3g}")
    if isinstance(found.get("pairs"), int):
        details.append(f"{found['pairs']} pairs")
    if found.get("why"):
        details.append(str(found["why"]))
    status = str(found.get("status", "recorded"))
    cls = "" if status == "confirmed" else ' class="none"'
    return (f"<td{cls}><strong>{html.escape(status)}</strong>"
            + (f'<br><span class="meta">{html.escape("; ".join(details))}</span>' if details else "") + "</td>")


#: the overview's sections: (confirm.by_status group, title, folded)
SECTIONS = (
    ("actionable", f"Confirmed changes a user would act on (at least {confirm.ACT_RELATIVE:.0%} and "
                   f"{confirm.ACT_BYTES // detect.MIB} MiB side by side)", False),
    ("confirmed", "Other confirmed changes (smaller than that)", False),
    ("pending", "Flagged by the sweep, not measured side by side yet", True),
    ("not confirmed", "Flagged by the sweep, did not hold side by side", True),
    ("failed", "Flagged, the side-by-side run could not measure them", True),
    ("advisory", "Time (advisory: measured on a shared machine, never confirmed)", True),
)


def render_overview(per_framework, with_page, diffs=None):
    """The overview page; `with_page`: the frameworks whose own page sits beside it;
    `diffs`: {(framework, workload, mode, A, B): href} of the diff pages."""
    diffs = diffs or {}
    changes = newest_first(per_framework)

    def name_link(name, anchor=""):
        if name not in with_page:
            return html.escape(name)
        return f'<a href="{html.escape(name)}.html{html.escape(anchor)}">{html.escape(name)}</a>'

    def row(c):
        relative = f" ({signed_percent(c['relative'])})" if c.get("relative") is not None else ""
        figure = html.escape(c["figure"]) + (" <span class=\"meta\">(advisory: time on a shared machine)</span>"
                                             if c.get("advisory") else "")
        return (
            f'<tr><td>{name_link(c["framework"], "#" + c["workload"] + "-" + c["mode"])}</td>'
            f'<td>{html.escape(c["before_release"])} → <strong>{html.escape(c["release"])}</strong>'
            f'<br><span class="meta">{html.escape(c["uploaded"] or "upload date unknown")}</span></td>'
            f'<td>{html.escape(c["workload"])} · {html.escape(c["mode"])}</td><td>{figure}</td>'
            f'<td>{html.escape(str(c["size"]))}</td>'
            f'<td class="num {html.escape(c.get("direction", ""))}">{detect.fmt(c["figure"], c["before"])} → '
            f'{detect.fmt(c["figure"], c["after"])}{relative}</td>'
            f'<td class="num">{detect.fmt(c["figure"], c["band"])}</td>'
            + _commit(c.get("search")) + _confirmation(c) + _why(c, diffs) + "</tr>")

    def table(group):
        return ("<table><thead><tr><th>framework</th><th>releases</th><th>cell</th><th>figure</th><th>size</th>"
                "<th>median before → after</th><th>band</th><th>commit (stage 2)</th><th>confirmation</th>"
                f"<th>why</th></tr></thead><tbody>{''.join(row(c) for c in group)}</tbody></table>")

    counts = {name: confirm.tally(found).get("all", {}) for name, found in per_framework}
    links = " · ".join(f"{name_link(name)} ({counts[name].get('confirmed', 0)} confirmed of "
                       f"{len(found)} flagged)" for name, found in per_framework)
    groups = confirm.by_status(changes)
    sections = []
    for status, title, folded in SECTIONS:
        group = groups[status]
        if folded and group:
            sections.append(f'<details id="{status.replace(" ", "-")}"><summary>{html.escape(title)} '
                            f'({len(group)})</summary>{table(group)}</details>')
        elif not folded:
            sections.append(f'<h2 id="{status}">{html.escape(title)} ({len(group)})</h2>'
                            + (table(group) if group else '<p class="none">None yet.</p>'))
    body = (
        "<h1>Changes between releases</h1>"
        f"<p>{len(changes)} changes flagged across {len(per_framework)} frameworks. A flagged change: a "
        "figure whose median moved between two consecutive releases by more than the band, "
        "the larger spread of the two releases' rounds (at least 256 KiB for memory), with no overlap of "
        "their rounds (docs/releases.md). A flagged change is listed as a change only once it held when its two "
        f"releases were measured again side by side ({html.escape(confirm.RULE)}); the confirmed ones lead, "
        "newest release first, the rest are folded below. Time figures are advisory: measured on a shared machine. "
        "<em>Commit</em>: the first commit of the framework's own history that moved the figure, where "
        "stage 2 (<code>harness bisect --repo</code>) searched; confirmed when the commit before it measured good again. "
        "<em>Confirmation</em>: the side-by-side re-measurement (<code>harness releases --confirm</code>). "
        "<em>Why</em>: <code>harness diff</code> of the two releases' cells (the median round of each by step "
        "peak): the figures, the categories and ops that moved, the environment.</p>"
        f"<p>Each framework, release by release: {links}</p>"
        '<p>Changes made ready to file upstream (a standalone script run under both releases, and a report '
        'draft): <a href="upstream/index.html">upstream/</a>.</p>' + "".join(sections))
    return page("gradmem: changes between releases", body, depth=1)


def write(releases_dir, out_dir):
    """out_dir/releases/index.html and the framework pages; returns [(framework, tally, href)]:
    tally is confirm.tally's count over all figures ("flagged", "confirmed", "actionable",
    "not confirmed", "pending", ...), href from the site's root."""
    per_framework = load(releases_dir)
    target = os.path.join(out_dir, "releases")
    os.makedirs(target, exist_ok=True)
    listed, with_page = [], set()
    for framework, changes in per_framework:
        source = os.path.join(releases_dir, f"{framework}.html")
        href = None
        if os.path.exists(source):
            shutil.copyfile(source, os.path.join(target, f"{framework}.html"))
            with_home_link(os.path.join(target, f"{framework}.html"), depth=1)
            href = f"releases/{framework}.html"
            with_page.add(framework)
        tally = dict({"flagged": 0, "actionable": 0, **{status: 0 for status in confirm.STATUSES}},
                     **confirm.tally(changes).get("all", {}))
        listed.append((framework, tally, href or "releases/index.html"))
    with open(os.path.join(target, "index.html"), "w", encoding="utf-8") as handle:
        handle.write(render_overview(per_framework, with_page, write_diffs(releases_dir, per_framework, out_dir)))
    return listed
