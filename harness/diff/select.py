"""Pick one record out of result files by a selector: ``key=value[,key=value]``.

Keys are the record's own fields (framework, workload, mode, size, dtype, device,
version, framework_version, optimizer, remat, order, batch, status) and ``commit``
(the provenance's git commit; a prefix is enough). ``version`` of a cell that pinned
none matches the version that ran (``framework_version``). A selector that matches no record,
or several, is a `SelectionError` naming the values the file holds, so the user can
pick: the command turns it into exit 2.
"""

from harness import results

FIELDS = ("framework", "workload", "mode", "size", "dtype", "device", "version", "framework_version",
          "optimizer", "remat", "order", "batch", "status")
KEYS = FIELDS + ("commit",)


class SelectionError(ValueError):
    """No record, or several, matched; the message says what the file holds."""


def parse(text):
    """'framework=torch,mode=eager' -> {'framework': 'torch', 'mode': 'eager'}."""
    found = {}
    for part in filter(None, (text or "").split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SelectionError(f"selector {part!r} is not key=value; keys: {', '.join(KEYS)}")
        if key not in KEYS:
            raise SelectionError(f"unknown selector key {key!r}; keys: {', '.join(KEYS)}")
        found[key] = value.strip()
    return found


def value_of(record, key):
    if key == "commit":
        return (record.get("provenance") or {}).get("git_commit")
    return record.get(key)


def _matches(record, selector):
    for key, wanted in selector.items():
        value = value_of(record, key)
        if key == "commit":
            if not (value and str(value).startswith(wanted)):
                return False
        elif key == "version" and value is None:  # the installed version: the one that ran
            if str(record.get("framework_version")).lower() != wanted.lower():
                return False
        elif str(value).lower() != wanted.lower() and not (value is None and wanted.lower() in ("none", "null")):
            return False
    return True


def load(path):
    """The records of `path` (damaged lines skipped and named on stderr)."""
    records, damaged = results.scan_records(path, check=False)
    results.warn_damaged(damaged)
    return records


def pick(records, text, where):
    """The one record of `records` that selector `text` matches (`where`: the file, for
    messages)."""
    selector = parse(text)
    matched = [r for r in records if _matches(r, selector)]
    if len(matched) == 1:
        return matched[0]
    shown = text or "(no selector)"
    if not matched:
        raise SelectionError(f"no record in {where} matches {shown}; {where} holds: {describe(records)}")
    raise SelectionError(
        f"{len(matched)} records in {where} match {shown}; add key=value to pick one. They differ in: "
        f"{describe(matched)}"
    )


def describe(records):
    """What `records` hold: for each key whose values differ, the values (or, for one
    record, its cell)."""
    if not records:
        return "no records"
    if len(records) == 1:
        return label(records[0])
    parts = []
    for key in KEYS:
        values = sorted({str(value_of(r, key)) for r in records})
        if len(values) > 1:
            parts.append(f"{key}={'|'.join(values)}")
    if not parts:  # identical cells (a re-run appended to the file)
        return f"{len(records)} records of one cell ({label(records[0])}), e.g. started_at " + ", ".join(
            str((r.get("provenance") or {}).get("started_at")) for r in records[:4])
    return f"{len(records)} records; " + "; ".join(parts)


def label(record):
    """'rnn_fanout small float32 torch eager cpu' (+ version, commit where set)."""
    parts = [str(record.get(k)) for k in ("workload", "size", "dtype", "framework", "mode", "device")]
    for key in ("optimizer", "batch"):
        if record.get(key):
            parts.append(f"{key}={record[key]}")
    if (record.get("remat") or "none") != "none":
        parts.append(f"remat={record['remat']}")
    version = record.get("framework_version") or record.get("version")
    if version:
        parts.append(f"version={version}")
    commit = value_of(record, "commit")
    if commit:
        parts.append(f"commit={str(commit)[:12]}")
    return " ".join(parts)
