"""`python -m harness site --out DIR`: the observatory, one static site of everything
the repository holds (docs/site.md).

DIR/index.html         the front page: headline comparison per committed record set, links
DIR/comparison/D-S/    the comparison page (`harness report`) of device D, size S, and its records
DIR/releases/          every change between releases, newest first; each framework's page
DIR/releases/upstream/ the changes made ready to file upstream: each report draft and its script
DIR/seeds.html         docs/seeds.md; DIR/gpu.html: docs/gpu.md
DIR/history/           the asv history site (needs asv and the vendored scripts; seen over HTTP)

Every page but the history opens from disk; no page loads anything from elsewhere.
"""

import os
import shutil
import sys

from harness.results import write_text_atomic
from harness.report.records import RecordError
from harness.site import comparisons, docs, front, history, releases, upstream

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the record sets the front page expects, and why one may be absent
EXPECTED = {
    "cpu-small": ("CPU, size small", "No committed CPU small records (results/cpu/small.jsonl): refresh with "
                 + comparisons.REFRESH["cpu"].format(size="small")),
    "cpu-paper": ("CPU, size paper", "No committed CPU paper records: the paper sizes take hours on a 2-core machine and were not "
                 "measured for the repository. Refresh with " + comparisons.REFRESH["cpu"].format(size="paper")),
}


def add_arguments(parser):
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write the site into")
    parser.add_argument("--root", default=ROOT, metavar="DIR",
                        help="the repository whose records, releases and docs the site shows (default: this one)")
    parser.add_argument("--history", default="build", choices=("build", "skip"),
                        help="build the asv history site into DIR/history (default build: needs asv and "
                        "the vendored scripts of make setup, ~10 s) or skip it")
    parser.add_argument("--asv-assets", metavar="DIR",
                        help="the history site's vendored scripts (default ROOT/.venv/asv-www)")


def build_site(out_dir, root=ROOT, with_history=True, asv_assets=None):
    """Write the whole site into out_dir; returns the front page's path."""
    os.makedirs(out_dir, exist_ok=True)
    for part in ("comparison", "releases"):  # what an earlier build wrote that this one may not
        shutil.rmtree(os.path.join(out_dir, part), ignore_errors=True)
    record_sets = comparisons.find(root)
    comparisons.write_pages(record_sets, out_dir)
    present = {s.name for s in record_sets}
    missing = [shown for name, shown in EXPECTED.items() if name not in present]
    listed = releases.write(os.path.join(root, "releases"), out_dir)
    upstream.write(os.path.join(root, "releases"), out_dir)  # releases/upstream/: the report drafts and scripts
    docs.write(os.path.join(root, "docs"), out_dir)
    if with_history:
        cpu = next((s for s in record_sets if s.device == "cpu"), None)
        comparison = os.path.join(os.path.abspath(out_dir), cpu.folder, "records.jsonl") if cpu else None
        found = history.build(root, out_dir, asv_assets or os.path.join(root, ".venv", "asv-www"), comparison)
    else:
        found = (None, "Not built (--history skip): python -m harness site --out DIR builds it into DIR/history.")
    path = os.path.join(out_dir, "index.html")
    write_text_atomic(path, front.render(record_sets, missing, listed, found, history.serve_note(out_dir)))
    return path


def main(args):
    root = os.path.abspath(args.root)
    if not all(os.path.isdir(os.path.join(root, part)) for part in ("results", "releases", "docs")):
        print(f"error: {root} is not a gradmem repository (no results/, releases/ and docs/): "
              "give --root, the checkout whose records the site shows", file=sys.stderr)
        return 2
    try:
        path = build_site(args.out, root, args.history == "build", args.asv_assets)
    except RecordError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0
