"""Provenance: where, when and with what every figure on the page was measured.

Distinct values across all records, so a page mixing two commits or two machines
shows both instead of pretending the figures share one origin.
"""

import json
from collections import Counter, defaultdict

from harness.report.fmt import esc


def _text(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def collect(records):
    """{field: Counter(value text -> number of records)}, versions and env flattened."""
    fields = defaultdict(Counter)
    for record in records:
        provenance = record.get("provenance") or {}
        for key, value in provenance.items():
            if key in ("versions", "env") and isinstance(value, dict):
                for name, item in value.items():
                    fields[f"{key}.{name}"][_text(item)] += 1
            elif key == "started_at":
                continue
            else:
                fields[key][_text(value)] += 1
    return fields


def render(records, files):
    fields = collect(records)
    started = sorted(
        str(r["provenance"]["started_at"]) for r in records
        if isinstance(r.get("provenance"), dict) and r["provenance"].get("started_at")
    )
    rows = [f"<tr><th>result files</th><td>{'<br>'.join(esc(f) for f in files)}</td></tr>"]
    if started:
        rows.append(f"<tr><th>started</th><td>{esc(started[0])} … {esc(started[-1])}</td></tr>")
    for key in sorted(fields):
        counts = fields[key]
        if len(counts) == 1:
            value = esc(next(iter(counts)))
        else:
            value = "<br>".join(f"{esc(v)} <span class=\"count\">({n} cells)</span>" for v, n in counts.most_common())
        rows.append(f"<tr><th>{esc(key)}</th><td>{value}</td></tr>")
    return f'<table class="provenance"><tbody>{"".join(rows)}</tbody></table>'
