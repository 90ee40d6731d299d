"""docs/releases.md's confirmation blocks, made from the stores instead of by hand.

    python tools/release_tallies.py                        # print the blocks
    python tools/release_tallies.py --write docs/releases.md   # replace them in place

The blocks, each found by the line that introduces it and replaced up to the first line
that is not part of it:

- after "**Confirmed changes a user would act on**": one bullet per (workload, mode,
  release pair) of every store's actionable changes (confirm.lead_lines);
- after "**Flagged vs confirmed**": the per-framework table (memory figures);
- after "Per figure, where anything was measured side by side:": the per-figure table;
- after "**What is left to confirm**": per store, the pending changes, their release
  pairs (all and past the size rule), and what measuring them costs at the pace of the
  samples its confirmation store holds;
- after "**Reproduced standalone**": per store, the actionable changes run standalone
  (`harness report-change`) and how many reproduced, from its FRAMEWORK.upstream.json;
- after "### What moved, and where" (the PyTorch section): every flagged change of step
  peak or retained in torch's stores, its band, the part that moved and its side-by-side
  verdict (torch is the one framework whose section lists every change in a table).

Every figure comes from the stores' `*.changes.json` (their `tally` and `changes`), so
the docs say what the stores hold after each `harness releases --confirm`.
"""

import argparse
import datetime
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.releases import confirm, detect  # noqa: E402
from harness.upstream import ids, store as upstream_store  # noqa: E402
from harness.units import MIB  # noqa: E402
from harness.versions import index  # noqa: E402

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
UPSTREAM_HEAD = "**Reproduced standalone**"
FRAMEWORK_HEAD = "**Flagged vs confirmed**"
FIGURE_HEAD = "Per figure, where anything was measured side by side:"
LEFT_HEAD = "**What is left to confirm**"
MOVED_HEAD = "### What moved, and where"
#: the stores MOVED_HEAD's table lists, and the figures it lists of them
MOVED_FRAMEWORK = "torch"
MOVED_FIGURES = ("step_peak", "retained")
#: the widest wall between two samples counted as one sample's (samples further apart are two runs)
RUN_GAP_S = 600


def load():
    """[(label, bold, tag, changes document)]; each document carries its store's standalone
    outcomes (FRAMEWORK.upstream.json beside it) under "upstream"."""
    found = []
    for label, bold, tag, path in STORES:
        document = json.loads((ROOT / path).read_text())
        document.setdefault("framework", bold)
        document["upstream"] = upstream_store.read_outcomes(str((ROOT / path).parent), bold)
        found.append((label, bold, tag, document))
    return found


def confirm_records(changes_path):
    """The side-by-side samples held beside a store's changes file."""
    path = ROOT / changes_path.replace(".changes.json", ".confirm.jsonl")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sample_walls(records):
    """mode -> the walls between one side-by-side sample and the next (seconds, each
    sample's end to the next's within one run, under the later sample's mode): the pace a
    pending pair is measured at (a compiled sample can be a cold compile, ten times an
    eager one)."""
    ends = sorted((datetime.datetime.fromisoformat(r["provenance"]["finished_at"]), r["mode"])
                  for r in records if (r.get("provenance") or {}).get("finished_at"))
    walls = {}
    for (a, _), (b, mode) in zip(ends, ends[1:]):
        # a longer gap is between runs (or an environment's build), not a sample's cost
        if 0 < (b - a).total_seconds() <= RUN_GAP_S:
            walls.setdefault(mode, []).append((b - a).total_seconds())
    return walls


def _name(bold, tag):
    return f"**{bold}**" + (f" ({tag})" if tag else "")


def standalone(bold, document, change):
    """' · reproduced standalone (`ID`)' where the change was run standalone
    (`harness report-change`), else ''."""
    outcome = ((document.get("upstream") or {}).get("changes") or {}).get(ids.of(bold, change))
    words = upstream_store.label(outcome)
    return f" · {words} (`{ids.of(bold, change)}`)" if words else ""


def actionable_lines(stores):
    lines = []
    for _, bold, tag, document in stores:
        changes = confirm.by_status(document["changes"])["actionable"]
        lines += [f"- {_name(bold, tag)} {text}{standalone(bold, document, change)}"
                  for text, change in sorted(confirm.lead_lines(changes), key=lambda pair: pair[0])]
    return lines


def upstream_table(stores):
    """Per store: its actionable figures, how many were run standalone and what came of it."""
    lines = ["| framework | actionable figures | run standalone | reproduced standalone | harness only | of which the "
             "loss's form | not reproduced here | failed | environment unavailable |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, _, _, document in stores:
        counted = upstream_store.tally(document, document.get("upstream") or {})
        lines.append(f"| {label} | {counted['actionable']} | {counted['run']} | {counted['reproduced']} | "
                     f"{counted['harness only']} | {counted['loss form']} | {counted['not reproduced here']} | "
                     f"{counted['failed']} | {counted['unavailable']} |")
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


def left_table(stores):
    """Per store: the pending changes, their (workload, mode, release pair) groups, the
    groups past the size rule, and the hours they take at the median sample wall of
    their mode held (PAIRS pairs = 2 x PAIRS samples a group; a lower bound: an
    undecided figure goes on to MAX_PAIRS, and a release's environment is built first
    where it is not kept)."""
    lines = ["| framework | changes not measured yet | their release pairs (workload, mode) | of them past the size "
             "rule | median wall a sample, s (samples) | hours: all / past the size rule |",
             "|---|---|---|---|---|---|"]
    paths = {label: path for label, _, _, path in STORES}
    for label, _, _, document in stores:
        pending = [c for c in document["changes"] if (c.get("confirmation") or {}).get("status") == "pending"]
        groups = {confirm.group_key(c) for c in pending}
        large = {confirm.group_key(c) for c in pending if confirm.large(c)}
        held = sample_walls(confirm_records(paths[label]))
        walls = {mode: statistics.median(w) for mode, w in held.items()}
        counts = {mode: len(w) for mode, w in held.items()}
        pace = ", ".join(f"{mode} {walls[mode]:.0f} ({counts[mode]})" for mode in sorted(walls)) or "–"

        def hours(keys):
            if any(key[1] not in walls for key in keys):
                return "?"  # a mode without a sample held: no pace to go by
            return f"{sum(walls[key[1]] for key in keys) * 2 * confirm.PAIRS / 3600:.1f}"

        cost = f"{hours(groups)} / {hours(large)}" if groups else "–"
        lines.append(f"| {label} | {len(pending)} | {len(groups)} | {len(large)} | {pace} | {cost} |")
    return lines


def _side_by_side(change):
    """A change's verdict in a table cell: the side-by-side figures where it was measured."""
    found = change.get("confirmation") or {}
    status = found.get("status", "pending")
    if "before" not in found:
        return status
    return (f"{status}{confirm.across_note(found)}: {found['before'] / MIB:.2f} -> {found['after'] / MIB:.2f}, "
            f"{found['pairs']} pairs, p = {found['p']:.3g}{confirm.machines_suffix(found)}")


def moved_table(stores):
    """Every flagged (not advisory) step-peak or retained change of MOVED_FRAMEWORK's
    stores, in release order: the sweep's medians and band, what moved (the breakdown,
    the retained page kind) and the side-by-side verdict. Only a confirmed row is a
    change (confirm.py); the others are shown as what the sweep flagged."""
    lines = ["| store | workload | figure | release pair | sweep, MiB (median -> median) | band | what moved | "
             "side by side |", "|---|---|---|---|---|---|---|---|"]
    for _, bold, tag, document in stores:
        if bold != MOVED_FRAMEWORK:
            continue
        rows = [c for c in document["changes"] if not c["advisory"] and c["figure"] in MOVED_FIGURES]
        rows.sort(key=lambda c: (c["mode"] != "eager", MOVED_FIGURES.index(c["figure"]),
                                 index.sort_key(c["before_release"]), index.sort_key(c["release"]),
                                 c["workload"]))
        for c in rows:
            pair = f"{c['before_release']} -> {c['release']}{detect.gap_note(c)}"  # the page's words for a gap
            lines.append(f"| {tag} | {c['workload']} {c['mode']} | {c['figure']} | {pair} | "
                         f"{c['before'] / MIB:.2f} -> {c['after'] / MIB:.2f} ({c['delta'] / MIB:+.2f}) | "
                         f"{c['band'] / MIB:.2f} | {(c.get('parts') or {}).get('moved', '')} | {_side_by_side(c)} |")
    return lines


def blocks(stores):
    """(head, block) of every block the docs hold, in the docs' order."""
    return ((ACTIONABLE_HEAD, actionable_lines(stores)), (FRAMEWORK_HEAD, framework_table(stores)),
            (FIGURE_HEAD, figure_table(stores)), (LEFT_HEAD, left_table(stores)),
            (UPSTREAM_HEAD, upstream_table(stores)), (MOVED_HEAD, moved_table(stores)))


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
    parser.add_argument("--write", metavar="MARKDOWN", help="replace the blocks in this file")
    args = parser.parse_args(argv)
    made = blocks(load())
    if not args.write:
        for head, block in made:
            print(head, *block, "", sep="\n")
        return 0
    path = pathlib.Path(args.write)
    text = path.read_text()
    for head, block in made:
        text = replace_block(text, head, block)
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
