"""`python -m harness report FILE.jsonl [...] --out DIR`: write the comparison page.

Writes DIR/index.html, one self-contained file (inline CSS and SVG) that opens from
disk: the workload × framework grid per view coloured by peak / bound, bar charts of
peak and time per phase, memory timelines, gradient agreement, statuses, provenance.
"""

import os
import sys
import tempfile

from harness.report import page
from harness.report.records import RecordError, load


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="FILE.jsonl",
                        help="result files from `python -m harness run` (later files win for repeated cells)")
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write index.html into")
    parser.add_argument("--title", default="gradmem comparison", help="page title")
    parser.add_argument("--history-url", metavar="URL",
                        help="link the page to the history site (asv) at this URL, e.g. ../index.html "
                        "when the page sits in the site's comparison/ folder (tools/asv_site.py)")


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".index-", suffix=".html")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the page is for reading
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def build(files, out_dir, title="gradmem comparison", history_url=None):
    """Write out_dir/index.html from the result files; return its path."""
    records = load(files)
    if not records:
        raise RecordError(f"no result records in {', '.join(files)}")
    path = os.path.join(out_dir, "index.html")
    write_atomically(path, page.render(records, files, title, history_url))
    return path


def main(args):
    try:
        path = build(args.files, args.out, args.title, args.history_url)
    except RecordError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0
