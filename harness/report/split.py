"""The stacked bar of one cell: its footprint split into retained | saved activations |
gradients | temporaries (harness/measure/breakdown.py says how each is counted).

Retained is what the framework kept from earlier steps; the other three divide the
step peak. A category the framework gives no way to see (null in the record) is left
out of the bar and named under it, never drawn as a guess. All bars of one workload
share a scale (`scale_bytes`), so their lengths compare across frameworks.
"""

from harness import figures
from harness.report import records as rec
from harness.report import svg
from harness.report.fmt import esc, human_bytes

#: (label, colour) of each segment, in drawing order
SEGMENTS = (
    ("retained", "#a8a8a8"),
    ("saved activations", "#4c78a8"),
    ("gradients", "#f58518"),
    ("temporaries", "#e45756"),
)
WIDTH, HEIGHT = 110, 10


def parts(record):
    """[(label, bytes or None)] of the four segments of `record`."""
    breakdown = record.get("breakdown_bytes") or {}
    return [
        ("retained", figures.value(record, "retained")),
        ("saved activations", rec.metric(breakdown, "saved_activations")),
        ("gradients", rec.metric(breakdown, "gradients")),
        ("temporaries", rec.metric(breakdown, "temporaries")),
    ]


def scale_bytes(records):
    """The largest bar of `records`: their common scale."""
    sizes = [sum(v for _, v in parts(r) if v is not None) for r in records if r.get("status") == "ok"]
    return max(sizes + [0])


def render(record, scale):
    """Inline SVG of the bar, and the names of the categories not seen."""
    split = parts(record)
    if scale <= 0:
        return ""
    x, body = 0.0, []
    kinds = record.get("retained_detail_bytes") or {}
    for (label, value), (_, fill) in zip(split, SEGMENTS):
        if value is None or value <= 0:
            continue
        width = WIDTH * value / scale
        title = f"{label}: {human_bytes(value)}"
        if label == "retained" and kinds:  # which kind of page it is
            title += " (" + ", ".join(f"{k} {human_bytes(v)}" for k, v in kinds.items() if v) + ")"
        body.append(svg.rect(x, 0, width, HEIGHT, fill, title))
        x += width
    body.append(f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#ccc"/>')
    unseen = [label for label, value in split if value is None]
    note = f'<div class="unseen">not seen: {esc(", ".join(unseen))}</div>' if unseen else ""
    return f'<div class="split">{svg.svg(WIDTH, HEIGHT, "".join(body), "footprint split")}</div>{note}'


def legend():
    swatches = "".join(
        f'<span class="swatch" style="background:{fill}">{esc(label)}</span>' for label, fill in SEGMENTS
    )
    return f"Bar: {swatches} (one scale per workload row)."
