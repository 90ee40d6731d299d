"""Result records as the page needs them: loaded, ordered, grouped into views.

A *view* is everything about a cell except workload and framework (size, dtype,
device, mode, optimizer): one grid per view. Inside a view a *column* is a framework,
suffixed with its variant (remat, order) when that is not the default, so that two
records never silently share a grid cell.
"""

import json
from collections import OrderedDict

from harness import frameworks, workloads

CELL_KEYS = ("workload", "size", "dtype", "framework", "mode", "device")
STATUSES = ("ok", "oom", "timeout", "error", "unavailable")
PHASES = ("forward", "backward", "step")


class RecordError(ValueError):
    """A result file that cannot be read as result records; the message says where."""


def load(paths):
    """All records of the JSONL files at `paths`, in file order."""
    try:
        from harness import results
    except ImportError:  # the measurement package is optional for reading files
        results = None
    records = []
    for path in paths:
        if results is not None and hasattr(results, "read_records"):
            loaded = list(results.read_records(path))
        else:
            loaded = _read_jsonl(path)
        for index, record in enumerate(loaded):
            missing = [key for key in CELL_KEYS + ("status",) if key not in record]
            if missing:
                raise RecordError(f"{path}: record {index + 1} lacks {', '.join(missing)}")
        records.extend(loaded)
    return records


def _read_jsonl(path):
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise RecordError(f"{path}:{number}: not JSON ({err.msg})") from None
    except FileNotFoundError:
        raise RecordError(f"{path}: no such result file") from None
    return records


def metric(record, key, sub=None):
    """record[key][sub] (or record[key]) when it is a number, else None."""
    value = record.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def peak_over_bound(record):
    peak, bound = metric(record, "peak_bytes", "total"), metric(record, "bound_bytes")
    if record.get("status") != "ok" or peak is None or not bound:
        return None
    return peak / bound


def view_key(record):
    return (
        record.get("size"),
        record.get("dtype"),
        record.get("device"),
        record.get("mode"),
        record.get("optimizer") or "none",
    )


def view_title(key):
    size, dtype, device, mode, optimizer = key
    text = f"{size} · {dtype} · {device} · {mode}"
    return text if optimizer == "none" else f"{text} · optimizer {optimizer}"


def column_key(record):
    """The framework, plus the variant when it is not the default."""
    label = str(record.get("framework"))
    variant = []
    if record.get("remat") not in (None, "none"):
        variant.append(f"remat={record['remat']}")
    if record.get("order") not in (None, "heap"):
        variant.append(f"order={record['order']}")
    return f"{label} ({', '.join(variant)})" if variant else label


def _rank(order, name):
    return (order.index(name), "") if name in order else (len(order), str(name))


def workload_rank(name):
    return _rank(workloads.NAMES, name)


def column_rank(label):
    framework = label.split(" (", 1)[0]
    return _rank(frameworks.NAMES, framework) + (label,)


def views(records):
    """OrderedDict view_key -> {"workloads": [...], "columns": [...], "cells": {(w, c): record}}.

    When a file holds the same cell twice (a re-run), the later record wins: files are
    read in the order given, so the newest file should come last.
    """
    grouped = {}
    for record in records:
        view = grouped.setdefault(view_key(record), {"cells": {}})
        view["cells"][(record["workload"], column_key(record))] = record
    ordered = OrderedDict()
    for key in sorted(grouped, key=lambda k: tuple(str(part) for part in k)):
        cells = grouped[key]["cells"]
        ordered[key] = {
            "workloads": sorted({w for w, _ in cells}, key=workload_rank),
            "columns": sorted({c for _, c in cells}, key=column_rank),
            "cells": cells,
        }
    return ordered
