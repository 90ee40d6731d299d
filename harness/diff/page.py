"""`harness diff --html OUT`: the difference as one static page (inline CSS, no script,
nothing fetched), so it opens from disk like the comparison page (harness/report/)."""

import os

from harness.diff.compare import moved
from harness.diff.text import aggregation_sentence, saved_side_sentence
from harness.measure.breakdown import RSS_METHOD
from harness.results import write_text_atomic
from harness.report.fmt import esc, human_bytes, human_seconds
from harness.report.page import CSS

EXTRA_CSS = """
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.grew { background: #f6d6d6; } td.shrank { background: #d8f0d8; }
tbody th { text-align: left; } tr.rest td, tr.rest th { font-style: italic; } .note { color: #555; font-size: 12px; max-width: 60em; }
h2 { font-size: 18px; } dt { font-weight: 600; } dd { margin: 0 0 .4em 1.5em; }
"""


def _fmt(value, unit="bytes"):
    if value is None:
        return "–"
    return human_seconds(value) if unit == "s" else human_bytes(value)


def _diff_cell(value, unit="bytes", a=None, b=None):
    """B - A, coloured only where the figure moved beyond noise (compare.moved)."""
    if value is None:
        return '<td class="num">–</td>'
    beyond = True
    if a is not None and b is not None:
        beyond = moved(a, b, 0.05, 0) if unit == "s" else moved(a, b)
    kind = ("grew" if value > 0 else "shrank" if value < 0 else "") if beyond else ""
    sign = "+" if value > 0 else "-" if value < 0 else ""
    return f'<td class="num {kind}">{esc(sign + _fmt(abs(value), unit) if value else "0")}</td>'


def _rows(rows, label=lambda r: r["figure"], extra=lambda r: ""):
    return "".join(
        f'<tr><th>{esc(label(r))}</th><td class="num">{esc(_fmt(r["a"], r.get("unit", "bytes")))}</td>'
        f'<td class="num">{esc(_fmt(r["b"], r.get("unit", "bytes")))}</td>{_diff_cell(r["diff"], r.get("unit", "bytes"), r["a"], r["b"])}'
        f"{extra(r)}</tr>" for r in rows)


def _table(head, body):
    return f"<table><thead><tr>{''.join(f'<th>{esc(h)}</th>' for h in head)}</tr></thead><tbody>{body}</tbody></table>"


def render(diff):
    figures = _table(["phase · figure", "A", "B", "B − A"], _rows(
        diff["figures"], label=lambda r: f"{r['phase']} · {r['figure']}"
        + (" (~ noisy)" if r.get("noisy_a") or r.get("noisy_b") else "")))
    e = diff["explained"]
    u = e["unexplained"]
    categories = _table(["category", "A", "B", "B − A"], _rows(e["categories"])
                        + f'<tr class="rest"><th>{esc(u["figure"])}</th><td></td><td></td>{_diff_cell(u["diff"])}</tr>')
    notes = ([f"Warning: {diff['source_mismatch']}."] if diff.get("source_mismatch") else []) + [u["note"] + "."] + [
        f"{c['figure']}: A {c['method_a']}; B {c['method_b']}" for c in e["categories"]
        if c["diff"] is None or (RSS_METHOD in (c["method_a"], c["method_b"]) and not c["same_method"])]
    ru = e["retained_unexplained"]
    retained = _table(["category", "A", "B", "B − A"], _rows(e["retained_categories"])
                      + f'<tr class="rest"><th>{esc(ru["figure"])}</th><td></td><td></td>{_diff_cell(ru["diff"])}</tr>')
    sections = [
        ("Figures", "Step peak: above the step's start (what one step needs); retained: the framework's own "
                    "pages (anonymous, shared memory) resident at the step's start above the baseline (kept between "
                    "steps); code pages: library pages the steps paged in (shared, reclaimable); footprint = retained "
                    "+ step peak.", figures),
        (f"Step peak difference by category: {_signed(e['step_peak']['diff'])}",
         "<br>".join(esc(n) for n in notes), categories),
    ]
    roles = diff.get("backward")
    if roles:
        for side, agg in roles["aggregation"].items():
            if agg:
                sections.append((f"{side.upper()}'s backward: gradient aggregation", esc(aggregation_sentence(agg)), ""))
        for part, title in (("at_peak", "live at the backward's highest point"), ("allocated", "allocated by the backward")):
            found = roles.get(part)
            if not found:
                continue
            body = _rows(found["rows"]) + _rows([found["total"]])
            grew = f" Grew most: <b>{esc(found['grew_most'])}</b>." if found["grew_most"] else ""
            sections.append((f"By role, {title}", esc(roles["note"]) + grew, _table(["role", "A", "B", "B − A"], body)))
    sections.append((f"Retained difference by category: {_signed(e['retained']['diff'])}", esc(ru["note"]), retained))
    sections.append(("Saved activations by op", *_saved(diff["saved_by_op"])))
    env = diff["environment"]
    env_body = "".join(f"<tr><th>{esc(r['key'])}</th><td>{esc(r['what'])}</td><td>{esc(r['a'])}</td>"
                       f"<td>{esc(r['b'])}</td></tr>" for r in env)
    sections.append(("Environment differences that can move memory", "" if env else "None recorded.",
                     _table(["key", "what", "A", "B"], env_body) if env else ""))
    layer = diff["layer"]
    layer_body = _table(["figure", "A", "B", "B − A"], _rows(layer["rows"])) if layer.get("rows") else ""
    sections.append(("Which layer changed", esc(layer["verdict"] or f"Not said: {layer['reason']}")
                     + (f" ({esc(layer['rule'])})" if layer.get("rule") else ""), layer_body))
    body = "".join(f'<section><h2>{esc(title) if "<" not in title else title}</h2>'
                   f'<p class="note">{note}</p>{content}</section>' for title, note, content in sections)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>gradmem diff</title><style>{CSS}{EXTRA_CSS}</style></head>
<body><h1>gradmem diff</h1>
<dl><dt>A</dt><dd>{esc(diff['a'])}</dd><dt>B</dt><dd>{esc(diff['b'])}</dd></dl>
{body}
</body></html>
"""


def _signed(value):
    if value is None:
        return "–"
    return ("+" if value > 0 else "-" if value < 0 else "") + (_fmt(abs(value)) if value else "0")


def _saved(s):
    notes = [saved_side_sentence(side, s[side]) + "." for side in ("a", "b")]
    if not s["rows"]:
        return esc(" ".join(notes)), ""

    def names(r):
        return f'<td>{esc(", ".join(r["names_a"]))}</td><td>{esc(", ".join(r["names_b"]))}</td>'

    rows = [dict(r, figure=r["op"] + ("" if r["in_op_set"] else " *")) for r in s["rows"]]
    body = _rows(rows, extra=names)
    return (esc(" ".join(notes)) + " The op that made each buffer; biggest difference first; * no op of the op "
            "set corresponds (the framework's own name).",
            _table(["op", "A", "B", "B − A", "A's names", "B's names"], body))


def write(path, diff, a=None, b=None):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text_atomic(path, render(diff))
