"""A `harness run --schedule-log` file, told from a result file by what its lines hold.

The log (schedule.PassLog) is JSONL too, one line per pass ({"pass": KIND, "cell": ...,
"started_s": ...}) and a last {"sweep": {...}} line, and tools/gpu_sweep.sh writes it
beside the records (OUT/schedule-N.jsonl), so a folder of committed records can hold
both. A record always carries "schema" and its cell's keys; a log line never does.
Readers of records (harness report, the site) use `is_pass_log` to leave a log out
instead of naming each of its lines as a damaged record.
"""

import json

#: the keys that make a line a log's: a pass, or the closing summary
PASS_KEY, SUMMARY_KEY = "pass", "sweep"


def is_pass_line(item):
    """Whether a parsed JSON line is one of a schedule log's."""
    if not isinstance(item, dict) or "schema" in item:
        return False
    return PASS_KEY in item or set(item) == {SUMMARY_KEY}


def is_pass_log(path):
    """True when every line of `path` that parses is a schedule log's (at least one
    does): a log cut short by a killed sweep is still one. False for a result file,
    a damaged one included (its lines are named as damaged where it is read), and for
    a file that cannot be read (its reader says why)."""
    seen = False
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a cut last line: decided by the others
                if not is_pass_line(item):
                    return False
                seen = True
    except OSError:
        return False
    return seen
