"""The whole page: one self-contained index.html (inline CSS and SVG, no scripts).

No external resource of any kind (the `data:` favicon stops the browser asking the
file system for one), so the page opens from disk, offline, and its browser console
stays empty.
"""

import os

from harness.report import (charts, gradients, grid, lowest, orders, predicted, provenance, remat, saved, scaling,
                            statuses, timelines)
from harness.report import records as rec
from harness.report.fmt import esc
from harness.results import write_text_atomic
from harness.sweep import resume

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; }
thead th { background: #f3f3f3; }
table.grid td.cell { min-width: 7.5em; text-align: center; }
td.cell .noisy { color: #a35a00; font-style: italic; }
td.cell .pinned { color: #a35a00; }
td.cell .peak { font-weight: 600; } td.cell .ratio, td.cell .time, td.cell .first { font-size: 12px; }
td.cell .retained { font-weight: 400; font-size: 12px; color: #444; }
td.cell .cache { font-size: 12px; color: #444; }
td.cell .predicted { font-size: 12px; color: #555; font-style: italic; }
td.cell .split { margin-top: 3px; line-height: 0; } td.cell .unseen { font-size: 10px; color: #666; }
.meaning { max-width: 60em; }
td.cell .message, td.message { font-size: 11px; color: #444; max-width: 22em; overflow-wrap: anywhere; }
td.cell .status { font-weight: 600; text-transform: uppercase; font-size: 12px; }
.status-unavailable { background: #e6e6e6; }
.status-error, .status-oom, .status-timeout {
  background: repeating-linear-gradient(45deg, #f6d6d6, #f6d6d6 6px, #fbeaea 6px, #fbeaea 12px); }
td.absent { color: #999; text-align: center; }
.swatch, .badge { display: inline-block; padding: 1px 6px; margin: 0 2px; border: 1px solid #bbb;
  border-radius: 3px; font-size: 12px; }
.badge.status-ok { background: #d8f0d8; }
.grad-agrees { background: #d8f0d8; } .grad-kink { background: #e4f2d6; } .grad-disagrees { background: #f6c6c6; }
.legend, .none { color: #555; font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; margin: 12px 0; }
svg text { font: 11px sans-serif; fill: #222; } svg text.title { font-weight: 600; font-size: 12px; }
svg text.small { font-size: 10px; fill: #444; } svg text.status-text { fill: #a33; font-weight: 600; }
svg line.bound { stroke: #c00; stroke-dasharray: 4 3; } svg line.axis { stroke: #888; }
svg line.mark { stroke: #999; stroke-dasharray: 2 2; } svg polyline.rss { fill: none; stroke: #4c78a8; stroke-width: 1.3; }
.small-multiples { display: flex; flex-wrap: wrap; gap: 12px; }
table.saved-by-op td { text-align: right; } table.saved-by-op tbody th { text-align: left; } table.saved-by-op tr.total td { font-size: 12px; }
nav a { margin-right: 1em; } .count { color: #777; }
table.provenance td { font-family: ui-monospace, monospace; font-size: 12px; }
.verified { background: #d8f0d8; } .unverified, td.low-r2 { background: #fff1c2; }
.remat-lowered { background: #d8f0d8; } .remat-raised { background: #f6c6c6; } .remat-unchanged { background: #fff1c2; }
""" + lowest.CSS + "\n"


def _view_section(index, key, view):
    head = (
        f'<section class="view" id="view-{index}"><h2>{esc(rec.view_title(key))}</h2>'
        f"{grid.legend()}{grid.render(view)}"
    )
    if not any(r.get("status") == "ok" for r in view["cells"].values()):
        return head + '<p class="none">No cell of this view ran; the grid says why.</p></section>'
    return (
        head + f"<h3>Step peak and time per phase</h3>{charts.render(view)}"
        f"<h3>Memory timelines</h3>{timelines.render(view)}"
        f"<h3>Gradient agreement</h3>{gradients.render(view)}"
        f"<h3>Saved activations by op</h3>{saved.render(view)}</section>"
    )


def write_page(files, out_dir, title="gradmem comparison", history_url=None):
    """Write out_dir/index.html from the result files; return its path (RecordError
    when they hold no record)."""
    records = rec.load(files)
    if not records:
        raise rec.RecordError(f"no result records in {', '.join(files)}")
    path = os.path.join(out_dir, "index.html")
    write_text_atomic(path, render(records, files, title, history_url))
    return path


def render(records, files, title="gradmem comparison", history_url=None):
    # A cell measured again is shown by its newest record (the grid's rule), and counted,
    # its status and provenance told, once: the count agrees with the site's front page.
    shown = resume.newest(records)
    superseded = len(records) - len(shown)
    count = f"{len(shown)} cells from {len(files)} file(s)"
    if superseded:
        count += f" (each cell's newest record; {superseded} older record(s) of cells measured again not shown)"
    # Records with a batch (`harness scale`) are points of a line, not cells of the grid.
    scaled = [r for r in records if r.get("batch") is not None]
    plain = [r for r in records if r.get("batch") is None]
    views = rec.views(plain)
    # A link, not a load: the page itself still fetches nothing.
    nav = f'<a class="history" href="{esc(history_url)}">history per commit (asv)</a>' if history_url else ""
    nav += "".join(
        f'<a href="#view-{i}">{esc(rec.view_title(key))}</a>' for i, key in enumerate(views)
    )
    sections = "".join(_view_section(i, key, view) for i, (key, view) in enumerate(views.items()))
    studies = [
        ("checkpointing", "Checkpointing: does rematerialisation lower the peak?", remat.render(plain)),
        ("orders", "Execution order: the reference engine's backward schedules", orders.render(plain)),
        ("scaling", "Scaling: memory against the batch, and the largest batch that fits", scaling.render(scaled)),
        ("predicted", "Predicted against measured: each framework's own memory prediction", predicted.render(plain)),
    ]
    studies = [(anchor, heading, body) for anchor, heading, body in studies if body]
    nav += "".join(f'<a href="#{anchor}">{anchor}</a>' for anchor, _, _ in studies)
    sections += "".join(f'<section id="{a}"><h2>{esc(h)}</h2>{b}</section>' for a, h, b in studies)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body><h1>{esc(title)}</h1>
<p>{esc(count)}. {statuses.summary(shown)}</p>
<nav>{nav}<a href="#statuses">statuses</a><a href="#provenance">provenance</a></nav>
{sections}
<section id="statuses"><h2>Cells that did not run</h2>{statuses.render(shown)}</section>
<section id="provenance"><h2>Provenance</h2>{provenance.render(shown, files)}</section>
</body></html>
"""
