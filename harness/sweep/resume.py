"""`harness run --resume`: the planned cells whose records are already in --out.

A killed sweep keeps every finished record (each is appended atomically), so running
it again with the same arguments and --resume measures only the cells without one. A
cell is its CELL_KEYS plus its variant (optimizer, remat, order, batch) and pinned
version; a record of any status counts as done (re-running a failed cell is a new sweep, not a resume). Records
measured with other settings (seed, --warmup, --repeat, --precision, --time-budget,
--threads, --timeout, --memory-limit: cell_runner.SETTINGS) are refused rather than mixed into one table, and
so are records that predate a setting (e.g. timed before --precision existed: a fixed
number of steps, not the same figure); damaged lines are named and their cells run again.
"""

from harness import choices, results
from harness.sweep.cell_runner import SETTINGS


def key(cell):
    """What makes two cells (or a cell and a record) the same measurement."""
    return series_key(cell) + (cell.get("batch"),)


def series_key(cell):
    """`key` without the batch: the cells `harness scale` fits one line through."""
    return tuple(cell.get(k) for k in results.CELL_KEYS) + (
        cell.get("optimizer"),
        cell.get("remat") or "none",
        cell.get("order"),
        cell.get("version"),
    )


def newest(records):
    """The newest record of each cell, in the order the cells first appear."""
    latest = {}
    for record in records:
        latest.pop(key(record), None)
        latest[key(record)] = record
    return list(latest.values())


def records_in(path):
    """The records of the result file at `path`, [] when there is none yet (nothing to
    resume from); damaged lines are named on stderr and skipped. What a sweep, a
    release store's round and `harness scale` read back from the file they append to."""
    try:
        records, damaged = results.scan_records(path)
    except results.RecordFileError:
        return []
    results.warn_damaged(damaged)
    return records


def split(path, todo, settings):
    """(kept, remaining): the newest record in `path` of each planned cell, and the
    cells of `todo` without one. `settings` maps SETTINGS keys to this run's values
    (cell_runner.Options.settings());
    a kept record measured with others is a ChoiceError naming the option."""
    return divide(records_in(path), todo, settings, path)


def divide(records, todo, settings, path):
    """`split` of `records` (read from `path`, which the error names)."""
    planned = {key(cell) for cell in todo}
    kept = [r for r in newest(records) if key(r) in planned]
    for record in kept:
        _check_settings(path, record, settings)
    done = {key(r) for r in kept}
    return kept, [cell for cell in todo if key(cell) not in done]


def _check_settings(path, record, settings):
    measured = record.get("provenance") or {}
    for name, option in ((s.key, s.option) for s in SETTINGS):
        if name not in settings:
            continue
        if name not in measured:
            was = "no record of it (measured by an older gradmem)"
        elif measured[name] != settings[name]:
            was = f"{option} {measured[name]}"
        else:
            continue
        cell = " ".join(str(record.get(k)) for k in results.CELL_KEYS)
        raise choices.ChoiceError(
            f"--resume: {path} holds {cell} measured with {was}, this run asks for {option} {settings[name]}; "
            f"resume with the sweep's own arguments, or write to another --out"
        )
