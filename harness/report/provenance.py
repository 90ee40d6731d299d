"""Provenance: where, when and with what every figure on the page was measured.

Distinct values across all records, so a page mixing two commits or two machines
shows both instead of pretending the figures share one origin. Fields that differ
from cell to cell by nature (load times, baselines) are folded away below the shared
ones, so the commit, machine and versions stay readable.
"""

import json
from collections import Counter, defaultdict

from harness.report.fmt import esc, human_bytes

PER_CELL_WHEN_MORE_THAN = 3  # distinct values: more means a per-cell measurement
FIRST = ("git_commit", "machine", "python", "threads", "seed")
WHEN = ("started_at", "finished_at")  # shown once, as the span the cells were measured in


#: the sweep's limits as a reader reads them: {provenance key: (option, what null means)}
#: (harness/sweep/cell_runner.py SETTINGS records them; null is a limit that was off)
LIMITS = {
    "memory_limit_bytes": ("--memory-limit", "none: no address-space limit"),
    "timeout_s": ("--timeout", "none: no time limit"),
}


def _text(value, key=None):
    if key in LIMITS:
        option, off = LIMITS[key]
        if value is None:
            return f"{off} ({option})"
        if key == "memory_limit_bytes" and isinstance(value, int):
            return f"{human_bytes(value)} ({value} bytes, {option})"
        if isinstance(value, (int, float)):
            return f"{value:g} s ({option})"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "null" if value is None else str(value)


def collect(records):
    """{field: Counter(value text -> number of records)}, versions and env flattened."""
    fields = defaultdict(Counter)
    for record in records:
        provenance = record.get("provenance") or {}
        for key, value in provenance.items():
            if key in ("versions", "env") and isinstance(value, dict):
                for name, item in value.items():
                    fields[f"{key}.{name}"][_text(item)] += 1
            elif key not in WHEN:
                fields[key][_text(value, key)] += 1
    return fields


def _row(key, counts):
    if len(counts) == 1:
        value = esc(next(iter(counts)))
    else:
        value = "<br>".join(f'{esc(v)} <span class="count">({n} cells)</span>' for v, n in counts.most_common())
    return f"<tr><th>{esc(key)}</th><td>{value}</td></tr>"


def measured_span(records):
    """"FIRST START … LAST FINISH" of the cells (records before finished_at was kept
    give their start times only, and the text says so), or None."""
    def times(key):
        return sorted(str(r["provenance"][key]) for r in records
                      if isinstance(r.get("provenance"), dict) and r["provenance"].get(key))

    started, finished = times("started_at"), times("finished_at")
    if not started:
        return None
    if finished:
        return f"{started[0]} … {max(finished[-1], started[-1])} (first cell started … last finished)"
    return f"{started[0]} … {started[-1]} (first … last cell started)"


def render(records, files):
    fields = collect(records)
    rows = [f"<tr><th>result files</th><td>{'<br>'.join(esc(f) for f in files)}</td></tr>"]
    span = measured_span(records)
    if span:
        rows.append(f"<tr><th>measured</th><td>{esc(span)}</td></tr>")
    ordered = [k for k in FIRST if k in fields] + sorted(k for k in fields if k not in FIRST)
    shared = [k for k in ordered if len(fields[k]) <= PER_CELL_WHEN_MORE_THAN]
    per_cell = [k for k in ordered if len(fields[k]) > PER_CELL_WHEN_MORE_THAN]
    rows.extend(_row(k, fields[k]) for k in shared)
    html = f'<table class="provenance"><tbody>{"".join(rows)}</tbody></table>'
    if per_cell:
        folded = "".join(_row(k, fields[k]) for k in per_cell)
        html += (
            f"<details><summary>Fields that differ per cell ({', '.join(esc(k) for k in per_cell)})"
            f'</summary><table class="provenance"><tbody>{folded}</tbody></table></details>'
        )
    return html
