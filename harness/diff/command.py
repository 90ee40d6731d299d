"""`python -m harness diff A [B] --a SEL --b SEL [--json] [--html OUT]`.

A and B are result files (JSONL); one file with two selectors compares two of its
cells, two files compare a cell of each (a selector may be left out where its file
holds one record). A selector is ``key=value[,key=value]`` over the record's fields
(harness/diff/select.py). Prints each figure side by side per phase, the step peak's
difference split into the breakdown's categories with what no category explains
said as such, the ops whose saved bytes differ most, the environment differences
that can move memory, and (where both records carry a prediction) which layer
changed. Exit 0; 2 when a file cannot be read or a selector matches no record or
several (the message names what the file holds).
"""

import json
import sys

from harness import results
from harness.diff import compare, select


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="FILE", help="A [B]: result files (JSONL)")
    parser.add_argument("--a", default="", metavar="SEL", help="key=value[,key=value]: A's record")
    parser.add_argument("--b", default="", metavar="SEL", help="key=value[,key=value]: B's record")
    parser.add_argument("--json", action="store_true", help="print the difference as JSON (for tools)")
    parser.add_argument("--html", metavar="OUT", help="also write a static page of the difference to OUT")


def main(args):
    if len(args.files) > 2:
        print(f"error: diff takes one or two result files, got {len(args.files)}", file=sys.stderr)
        return 2
    try:
        a, b = _records(args)
    except (select.SelectionError, results.RecordFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    diff = compare.build(a, b, (select.label(a), select.label(b)))
    if args.json:
        print(json.dumps(diff, indent=1, default=str))
    else:
        from harness.diff import text

        sys.stdout.write(text.render(diff))
    if args.html:
        from harness.diff import page

        page.write(args.html, diff, a, b)
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _records(args):
    path_a = args.files[0]
    path_b = args.files[1] if len(args.files) == 2 else path_a
    records_a = select.load(path_a)
    records_b = records_a if path_b == path_a else select.load(path_b)
    if path_a == path_b and not (args.a and args.b):
        raise select.SelectionError(
            f"one file compares two of its records: give --a and --b; {path_a} holds: {select.describe(records_a)}")
    found = []
    for side, records, path, text in (("A", records_a, path_a, args.a), ("B", records_b, path_b, args.b)):
        record = select.pick(records, text, path)
        if record.get("status") != "ok":
            raise select.SelectionError(
                f"{side} ({select.label(record)}) is a {record.get('status')!r} record with no figures: "
                f"{record.get('message', '')[:300]}")
        found.append(record)
    return found
