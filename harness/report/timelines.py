"""Memory timelines: resident memory over time of each cell, phase boundaries marked.

One small chart per cell that recorded a timeline, each on its own byte scale
(labelled): frameworks start from baselines hundreds of MiB apart (their imports), so a
shared scale would flatten the smaller ones. Long timelines are thinned to at most
MAX_POINTS by keeping each stride's maximum, so no peak disappears from the plot.
"""

from harness.report import svg
from harness.report.fmt import esc, human_bytes, human_seconds

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 330, 162, 62, 22, 34
MAX_POINTS = 600
LABEL_GAP = 46  # px between phase labels
CHAR_W = 5.5  # px per character of a 10px label, roughly


def thin(times, values, limit=MAX_POINTS):
    """At most ~`limit` points, each stride represented by its maximum."""
    if len(values) <= limit:
        return list(times), list(values)
    stride = -(-len(values) // limit)
    out_t, out_v = [], []
    for start in range(0, len(values), stride):
        chunk = values[start : start + stride]
        top = max(range(len(chunk)), key=chunk.__getitem__)
        out_t.append(times[start + top])
        out_v.append(chunk[top])
    return out_t, out_v


def timeline_of(record):
    timeline = record.get("timeline")
    if record.get("status") != "ok" or not isinstance(timeline, dict):
        return None
    times, values = timeline.get("t_s") or [], timeline.get("rss_bytes") or []
    if len(times) < 2 or len(times) != len(values):
        return None
    return timeline


def chart(title, timeline):
    times, values = thin(timeline["t_s"], timeline["rss_bytes"])
    t0, t1 = times[0], max(times[-1], times[0] + 1e-9)
    y_min, y_max = min(values), max(values)
    span = max(y_max - y_min, 1)
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - TOP - BOTTOM

    def x(t):
        return LEFT + (t - t0) / (t1 - t0) * plot_w

    def y(v):
        return TOP + plot_h - (v - y_min) / span * plot_h

    points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, values))
    parts = [
        svg.text(0, 13, title, cls="title"),
        svg.line(LEFT, TOP, LEFT, TOP + plot_h, "axis"),
        svg.line(LEFT, TOP + plot_h, LEFT + plot_w, TOP + plot_h, "axis"),
        # top label as growth over the bottom: the shapes matter, baselines differ
        svg.text(LEFT - 4, TOP + 8, "+" + human_bytes(y_max - y_min), anchor="end", cls="small"),
        svg.text(LEFT - 4, TOP + plot_h, human_bytes(y_min), anchor="end", cls="small"),
        svg.text(LEFT + plot_w, HEIGHT - 6, human_seconds(t1 - t0), anchor="end", cls="small"),
        f'<polyline class="rss" points="{points}"/>',
    ]
    last_label_x = -LABEL_GAP
    for mark in timeline.get("marks") or []:
        if isinstance(mark, (list, tuple)) and len(mark) == 2 and isinstance(mark[0], (int, float)):
            mx = x(min(max(mark[0], t0), t1))
            parts.append(svg.line(mx, TOP, mx, TOP + plot_h, "mark", title=str(mark[1])))
            if mx - last_label_x >= LABEL_GAP:  # crowded marks keep their line, lose the label
                label = str(mark[1])
                fits = mx + 2 + CHAR_W * len(label) <= WIDTH
                parts.append(svg.text(mx + 2 if fits else mx - 2, TOP - 3, label,
                                      anchor="start" if fits else "end", cls="small mark-label"))
                last_label_x = mx
    return svg.svg(WIDTH, HEIGHT, "".join(parts), title)


def render(view):
    blocks = []
    for workload in view["workloads"]:
        found = []
        for column in view["columns"]:
            record = view["cells"].get((workload, column))
            timeline = timeline_of(record) if record else None
            if timeline:
                found.append((column, timeline))
        if not found:
            continue
        charts = "".join(chart(f"{workload} · {column}", t) for column, t in found)
        blocks.append(
            f'<details class="timelines"><summary>{esc(workload)}: memory timelines '
            f"({len(found)})</summary><div class=\"small-multiples\">{charts}</div></details>"
        )
    if not blocks:
        return '<p class="none">No cell of this view recorded a timeline.</p>'
    return "".join(blocks)
