"""docs/releases.md's confirmation blocks, made from the stores instead of by hand.

    python tools/release_tallies.py                        # print the three blocks
    python tools/release_tallies.py --write docs/releases.md   # replace them in place

The blocks, each found by the line that introduces it and replaced up to the first line
that is not part of it:

- after "**Confirmed changes a user would act on**": one bullet per (workload, mode,
  release pair) of every store's actionable changes (confirm.lead_lines);
- after "**Flagged vs confirmed**": the per-framework table (memory figures);
- after "Per figure, where anything was measured side by side:": the per-figure table.

Every figure comes from the stores' `*.changes.json` (their `tally` and `changes`), so
the docs say what the stores hold after each `harness releases --confirm`.
"""

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.releases import confirm, detect  # noqa: E402

#: (label in the docs, bold name in a bullet, the store's changes file), in the docs' order
STORES = (
    ("autograd", "autograd", None, "releases/autograd.changes.json"),
    ("tinygrad", "tinygrad", None, "releases/tinygrad.changes.json"),
    ("mlx", "mlx", None, "releases/mlx.changes.json"),
    ("pytensor", "pytensor", None, "releases/pytensor.changes.json"),
    ("paddle", "paddle", None, "releases/paddle.changes.json"),
    ("tensorflow", "tensorflow", None, "releases/tensorflow.changes.json"),
    ("jax", "jax", None, "releases/jax.changes.json"),
    ("torch (py3.11 store)", "torch", "py3.11", "releases/torch.changes.json"),
    ("torch (py3.10 store)", "torch", "py3.10", "releases/torch-py3.10/torch.changes.json"),
)
ACTIONABLE_HEAD = "**Confirmed changes a user would act on**"
FRAMEWORK_HEAD = "**Flagged vs confirmed**"
FIGURE_HEAD = "Per figure, where anything was measured side by side:"


def load():
    return [(label, bold, tag, json.loads((ROOT / path).read_text())) for label, bold, tag, path in STORES]


def _name(bold, tag):
    return f"**{bold}**" + (f" ({tag})" if tag else "")


def actionable_lines(stores):
    lines = []
    for _, bold, tag, document in stores:
        changes = confirm.by_status(document["changes"])["actionable"]
        lines += [f"- {_name(bold, tag)} {text}" for text, _ in sorted(confirm.lead_lines(changes))]
    return lines


def _memory(row):
    """(flagged, measured, confirmed, actionable, not confirmed, pending) of a tally row
    (`failed` counts as measured: the pair ran and a side had too few samples)."""
    measured = row["confirmed"] + row["not confirmed"] + row["failed"]
    return row["flagged"] - row["advisory"], measured, row["confirmed"], row["actionable"], row["not confirmed"], row["pending"]


def framework_table(stores):
    lines = ["| framework | memory changes flagged | measured side by side | confirmed | of them actionable "
             "| not confirmed | not measured yet |", "|---|---|---|---|---|---|---|"]
    for label, _, _, document in stores:
        lines.append(f"| {label} | " + " | ".join(str(n) for n in _memory(document["tally"]["all"])) + " |")
    return lines


def figure_table(stores):
    lines = ["| framework | figure | flagged | measured side by side | confirmed | actionable | not confirmed |",
             "|---|---|---|---|---|---|---|"]
    for label, bold, tag, document in stores:
        name = bold + (f" ({tag})" if tag else "")
        for figure in detect.FIGURES:
            row = document["tally"].get(figure)
            if not row or detect.FIGURES[figure] != "bytes":
                continue
            flagged, measured, confirmed, actionable, rejected, _ = _memory(row)
            if measured:
                lines.append(f"| {name} | {figure} | {flagged} | {measured} | {confirmed} | {actionable} | {rejected} |")
    return lines


def replace_block(text, head, block, starts=("|", "- ")):
    """`text` with the lines of the block after the paragraph that begins with `head`
    (the first run of lines beginning with one of `starts`) replaced by `block`."""
    lines = text.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
    if at is None:
        raise SystemExit(f"release_tallies: no line starting {head!r} in the docs")
    first = next(i for i in range(at, len(lines)) if lines[i].startswith(starts))
    last = first
    while last < len(lines) and lines[last].startswith(starts):
        last += 1
    return "\n".join(lines[:first] + block + lines[last:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="MARKDOWN", help="replace the three blocks in this file")
    args = parser.parse_args(argv)
    stores = load()
    blocks = ((ACTIONABLE_HEAD, actionable_lines(stores)), (FRAMEWORK_HEAD, framework_table(stores)),
              (FIGURE_HEAD, figure_table(stores)))
    if not args.write:
        for head, block in blocks:
            print(head, *block, "", sep="\n")
        return 0
    path = pathlib.Path(args.write)
    text = path.read_text()
    for head, block in blocks:
        text = replace_block(text, head, block)
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
