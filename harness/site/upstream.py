"""The changes made ready to file upstream: one page per report draft, with its script.

Reads releases/upstream/FRAMEWORK/*.md (the drafts `harness report-change` writes) and
releases/FRAMEWORK.upstream.json (the standalone outcomes); writes
DIR/releases/upstream/index.html (per framework: how many actionable changes were run
standalone and how many reproduced, then every draft with its verdict) and, per draft,
DIR/releases/upstream/FRAMEWORK/GROUP.html (the draft as HTML) beside a copy of its
script GROUP.py, which the draft links to (and GROUP.functions.py and GROUP.table.py, the
same step in the loss's other forms, where a harness-only move was run so).
"""

import glob
import html
import json
import os
import shutil

from harness.site import markdown
from harness.site.layout import page
from harness.upstream import ids
from harness.upstream import store as upstream_store


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def drafts(releases_dir):
    """[(framework, draft path)] held, frameworks and drafts in name order."""
    found = []
    for path in sorted(glob.glob(os.path.join(releases_dir, "upstream", "*", "*.md"))):
        found.append((os.path.basename(os.path.dirname(path)), path))
    return found


def _status_of(outcomes, group_name, changes):
    """The lead verdict's words of a group's draft (its changes' outcomes share the draft),
    and, where none of its changes is actionable in the store now (`changes`: {id: change}
    of the framework's changes.json), what it is instead (withdrawn side by side, say)."""
    mine = [(change_id, o) for change_id, o in outcomes.get("changes", {}).items()
            if os.path.basename(o.get("draft", "")) == group_name]
    lead_id, lead = next(((i, o) for i, o in mine if o.get("actionable")), mine[0] if mine else (None, None))
    said = upstream_store.label(lead) or "not run standalone"
    if not mine or any((changes.get(i) or {}).get("actionable") for i, _ in mine):
        return said
    return f"{upstream_store.standing(changes.get(lead_id))}; standalone: {said}"


def write(releases_dir, out_dir):
    """The pages; returns {framework: tally} (store.tally) of the frameworks with drafts."""
    target = os.path.join(out_dir, "releases", "upstream")
    shutil.rmtree(target, ignore_errors=True)
    held = drafts(releases_dir)
    tallies, rows, changes = {}, [], {}
    for framework, path in held:
        outcomes = upstream_store.read_outcomes(releases_dir, framework)
        if framework not in tallies:
            document = _read_json(os.path.join(releases_dir, f"{framework}.changes.json"))
            document.setdefault("framework", framework)
            tallies[framework] = upstream_store.tally(document, outcomes)
            changes[framework] = {ids.of(framework, c): c for c in document.get("changes") or []}
        name = os.path.basename(path)
        script = path[:-len(".md")] + ".py"
        folder = os.path.join(target, framework)
        os.makedirs(folder, exist_ok=True)
        script_name = os.path.basename(script)
        has_script = os.path.exists(script)
        copied = set()
        # the script, and the same step in the loss's other forms where it was run so
        for held_script in (path[:-len(".md")] + suffix for suffix in upstream_store.FORM_SUFFIX.values()):
            if os.path.exists(held_script):
                shutil.copyfile(held_script, os.path.join(folder, os.path.basename(held_script)))
                copied.add(os.path.basename(held_script))
        with open(path, encoding="utf-8") as handle:
            text = handle.read()

        def resolve(url, copied=frozenset(copied)):
            if url.endswith(".py") and "/" not in url:
                return url if url in copied else None
            return url if url.startswith("#") or "://" in url else None

        body = (f'<p class="meta">A report draft, written by <code>python -m harness report-change</code> from '
                f'<code>releases/upstream/{html.escape(framework)}/{html.escape(name)}</code>; '
                + (f'the standalone script: <a href="{html.escape(script_name)}">{html.escape(script_name)}</a>'
                   if has_script else "no script held") + "</p>\n" + markdown.to_html(text, resolve))
        page_name = name[:-len(".md")] + ".html"
        with open(os.path.join(folder, page_name), "w", encoding="utf-8") as handle:
            handle.write(page(f"gradmem: {_title(text)}", body, depth=3))
        rows.append((framework, _title(text), f"{framework}/{page_name}",
                     f"{framework}/{script_name}" if has_script else None, _status_of(outcomes, name, changes[framework])))
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, "index.html"), "w", encoding="utf-8") as handle:
        handle.write(render_index(tallies, rows))
    return tallies


def _title(text):
    """The draft's first heading as written (the site's converter's `title` drops '_', which
    workload names keep), without its code and bold marks."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].replace("`", "").replace("**", "").strip()
    return "report draft"


def render_index(tallies, rows):
    counts = "".join(
        f"<tr><td>{html.escape(fw)}</td><td class='num'>{t['actionable']}</td><td class='num'>{t['run']}</td>"
        f"<td class='num'>{t['reproduced']}</td><td class='num'>{t['harness only']}</td>"
        f"<td class='num'>{t['loss form']}</td>"
        f"<td class='num'>{t['not reproduced here']}</td>"
        f"<td class='num'>{t['failed']}</td><td class='num'>{t['unavailable']}</td></tr>"
        for fw, t in tallies.items())
    listed = "".join(
        f'<tr><td>{html.escape(fw)}</td><td><a href="{html.escape(href)}">{html.escape(title)}</a></td>'
        f'<td>{html.escape(status)}</td><td>'
        + (f'<a href="{html.escape(script)}">script</a>' if script else "–") + "</td></tr>"
        for fw, title, href, script, status in rows)
    body = (
        "<h1>Changes ready to file upstream</h1>"
        "<p>For a confirmed change between two releases, <code>python -m harness report-change ID</code> writes a "
        "standalone script (the workload's step in plain framework code and a probe of the same figures, importing "
        "only the framework, NumPy and the standard library), runs it under both releases in fresh processes, and "
        "writes a report draft a maintainer could act on. <em>Reproduced standalone</em>: the script's medians move "
        "the way gradmem's side-by-side ones did, by at least half; <em>harness only</em>: they do not, while "
        "gradmem's own memory pass run again beside them does (<em>the loss's form</em>: the script with each op a "
        "small function, as gradmem's op table runs the loss, does); <em>not reproduced here</em>: neither does on this "
        "machine today (docs/releases.md says why, where it was found). <em>Withdrawn</em> or <em>not "
        "actionable</em>: a draft written while its change was actionable, whose change the store has since judged "
        "again (measured side by side again, it did not hold): kept as it was run, for the record, not to file.</p>"
        + ("<h2>Per framework (actionable figures)</h2><table><thead><tr><th>framework</th><th>actionable</th>"
           "<th>run standalone</th><th>reproduced</th><th>harness only</th><th>of which the loss's form</th>"
           "<th>not reproduced here</th><th>failed</th>"
           "<th>unavailable</th>"
           f"</tr></thead><tbody>{counts}</tbody></table>" if counts else "")
        + ("<h2>The drafts</h2><table><thead><tr><th>framework</th><th>draft</th><th>status</th>"
           f"<th>script</th></tr></thead><tbody>{listed}</tbody></table>" if listed
           else '<p class="none">No draft written yet.</p>'))
    return page("gradmem: changes ready to file upstream", body, depth=2)
