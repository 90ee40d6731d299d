"""`python -m harness report FILE.jsonl [...] --out DIR`: write the comparison page.

Writes DIR/index.html, one self-contained file (inline CSS and SVG) that opens from
disk: the workload × framework grid per view coloured by peak / bound, bar charts of
peak and time per phase, memory timelines, gradient agreement, statuses, provenance.
"""

import sys

from harness.report.page import write_page
from harness.report.records import RecordError


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="FILE.jsonl",
                        help="result files from `python -m harness run` (later files win for repeated cells)")
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write index.html into")
    parser.add_argument("--title", default="gradmem comparison", help="page title")
    parser.add_argument("--history-url", metavar="URL",
                        help="link the page to the history site (asv) at this URL, e.g. ../index.html "
                        "when the page sits in the site's comparison/ folder (tools/asv_site.py)")


def main(args):
    try:
        path = write_page(args.files, args.out, args.title, args.history_url)
    except RecordError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0
