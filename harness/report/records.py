"""Result records as the page needs them: loaded, ordered, grouped into views.

A *view* is everything about a cell except workload and framework (size, dtype,
device, mode, optimizer): one grid per view. Records timed on more than one host (a
Ray sweep's nodes) add the host to the view: a grid never sets two machines' times
side by side. Inside a view a *column* is a framework,
suffixed with its pinned version ("jax==0.9.2": a series per version) and its variant
(remat, order) when that is not the default, so that two records never silently share
a grid cell.
"""

import sys
from collections import OrderedDict

from harness import choices, frameworks, results, workloads
from harness.origin import timed_on
from harness.sweep.pass_log import is_pass_log

CELL_KEYS = results.CELL_KEYS
STATUSES = results.STATUSES
PHASES = tuple(p for p in results.PHASES if p != "total")


class RecordError(ValueError):
    """A result file that cannot be read as result records; the message says where."""


def load(paths, stream=None):
    """All valid records of the JSONL files at `paths`, in file order. A line that is not
    a record of this schema (harness.results.validate) is named on stderr with its file
    and line and skipped; a file that cannot be read at all is a RecordError. A sweep's
    schedule log among them (a run folder's *.jsonl) is left out with a note, and is a
    RecordError when it is all there is."""
    logs = [path for path in paths if is_pass_log(path)]
    if logs and len(logs) == len(paths):
        raise RecordError(f"{logs[0]}: a schedule log (harness run --schedule-log: one line per pass), "
                          "not result records; give the --out file of that sweep")
    records, damaged = [], []
    for path in paths:
        if path in logs:
            print(f"note: {path}: a schedule log (harness run --schedule-log), not result records: left out",
                  file=stream or sys.stderr)
            continue
        try:
            loaded, bad = results.scan_records(path)
        except results.RecordFileError as err:
            raise RecordError(str(err)) from None
        records.extend(loaded)
        damaged.extend(bad)
    results.warn_damaged(damaged, stream)
    return records


def metric(record, key, sub=None):
    """record[key][sub] (or record[key]) when it is a number, else None."""
    value = record.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def view_key(record):
    return (
        record.get("size"),
        record.get("dtype"),
        record.get("device"),
        record.get("mode"),
        record.get("optimizer") or "none",
    )


def view_title(key):
    size, dtype, device, mode, optimizer = key[:5]
    text = f"{size} · {dtype} · {device} · {mode}"
    text = text if optimizer == "none" else f"{text} · optimizer {optimizer}"
    return text if len(key) < 6 else f"{text} · timed on {key[5]}"


def column_key(record, versioned=False):
    """The framework, plus the variant when it is not the default. A pinned version is
    a series of its own ("jax==0.9.2"); with `versioned` (the page also holds pinned
    versions of this framework) the installed one is labelled by its exact version too
    ("jax==0.10.2 (installed)")."""
    label = str(record.get("framework"))
    variant = []
    if record.get("version"):
        label += f"=={record['version']}"
    elif versioned and record.get("framework_version"):
        label += f"=={record['framework_version']}"
        variant.append("installed")
    if record.get("remat") not in (None, "none"):
        variant.append(f"remat={record['remat']}")
    if record.get("order") not in (None, "heap"):
        variant.append(f"order={record['order']}")
    return f"{label} ({', '.join(variant)})" if variant else label


def view_rank(key):
    """Order views as the choices are ordered: small before paper, cpu before cuda,
    eager before compiled; unknown values last, alphabetically."""
    size, dtype, device, mode, optimizer = key[:5]
    return (
        _rank(choices.SIZES, size), _rank(choices.DTYPES, dtype), _rank(choices.DEVICES, device),
        _rank(choices.MODES, mode), _rank(("none",) + choices.OPTIMIZERS, optimizer),
    ) + tuple(str(host) for host in key[5:])


def _rank(order, name):
    return (order.index(name), "") if name in order else (len(order), str(name))


def workload_rank(name):
    return _rank(workloads.NAMES, name)


def column_rank(label):
    framework = label.split(" (", 1)[0]
    name, _, version = framework.partition("==")
    return _rank(frameworks.NAMES, name) + (_version_rank(version), label)


def _version_rank(version):
    """The installed framework first, then pinned versions oldest first."""
    if not version:
        return ()
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in version.replace("-", ".").split("."))


def views(records):
    """OrderedDict view_key -> {"workloads": [...], "columns": [...], "cells": {(w, c): record}}.

    When a file holds the same cell twice (a re-run), the later record wins: files are
    read in the order given, so the newest file should come last.
    """
    grouped = {}
    pinned = {record.get("framework") for record in records if record.get("version")}
    by_host = len({timed_on(record) for record in records} - {None}) > 1
    for record in records:
        key = view_key(record) + ((timed_on(record) or "an unnamed host",) if by_host else ())
        view = grouped.setdefault(key, {"cells": {}})
        view["cells"][(record["workload"], column_key(record, record.get("framework") in pinned))] = record
    ordered = OrderedDict()
    for key in sorted(grouped, key=view_rank):
        cells = grouped[key]["cells"]
        ordered[key] = {
            "workloads": sorted({w for w, _ in cells}, key=workload_rank),
            "columns": sorted({c for _, c in cells}, key=column_rank),
            "cells": cells,
        }
    return ordered
