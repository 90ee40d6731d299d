"""Tiny inline-SVG helpers shared by the charts and timelines (no scripts, no fonts)."""

from harness.report.fmt import esc

SERIES_COLOURS = {"forward": "#4c78a8", "backward": "#f58518", "step": "#54a24b", "total": "#8c6d31"}
FALLBACK_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")


def colour(name, index):
    return SERIES_COLOURS.get(name, FALLBACK_COLOURS[index % len(FALLBACK_COLOURS)])


def svg(width, height, body, label):
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(label)}">{body}</svg>'
    )


def text(x, y, content, anchor="start", cls="", extra=""):
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}{extra}>{esc(content)}</text>'


def rect(x, y, width, height, fill, title=""):
    tip = f"<title>{esc(title)}</title>" if title else ""
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(width, 0):.1f}" height="{height:.1f}" fill="{fill}">{tip}</rect>'


def line(x1, y1, x2, y2, cls, title=""):
    tip = f"<title>{esc(title)}</title>" if title else ""
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{cls}">{tip}</line>'


def legend(series, x, y):
    parts = []
    for index, name in enumerate(series):
        left = x + index * 90
        parts.append(rect(left, y - 9, 10, 10, colour(name, index)))
        parts.append(text(left + 14, y, name, cls="small"))
    return "".join(parts)
