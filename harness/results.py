"""The result record: one JSON object per measured cell, in JSONL files.

The schema (version 2) is what the report and the asv benchmarks read; keys may be
added, never renamed (bump SCHEMA for anything incompatible; docs/measurement.md,
"Migration", says what changed from 1). Flat at top level:

- the cell: ``workload, size, dtype, framework, mode, device`` (strings),
  ``optimizer`` (null | "sgd" | "adam"), ``remat`` ("none"), ``order`` (the reference
  engine's backward order, else null), ``batch`` (null: the size's own batch; an int:
  the workload's batch axis set to it, by `harness scale`); ``version`` (the framework
  version the cell pinned, ``--framework jax==0.9.2``; null: the installed one) and
  ``framework_version`` (the exact version that ran; the runtime's, e.g. jaxlib, is in
  ``provenance.versions``);
- ``status`` (one of STATUSES) and ``message`` (why, when not "ok");
- metrics of an "ok" record (bytes are ints, seconds floats; a phase a cell did not
  run is an absent key, never a made-up number; ``total`` is always present). Memory,
  for the steady state and (``first_step_`` prefix) the cold first step
  (harness/measure/memory_meter.py):
  ``retained_bytes`` (int: the whole resident set at the step's start above the
  baseline taken before the first step; optional ``retained_detail_bytes``: the same
  split by kind of page, {anon, file, shmem}, adding up to it: the registry's
  ``retained`` is its anon + shmem pages, what the framework keeps, and ``code_pages``
  its file pages, harness/figures.py),
  ``peak_bytes`` ({forward, backward, step, total}: the step peak, above the resident
  bytes at the step's start: what the step needs; the headline figure), optional
  ``peak_file_bytes`` (same phases: the file-backed pages resident at the phase's end
  above the step's start: at most this much of the peak is library pages paged in),
  ``footprint_bytes`` (same phases: the whole resident set retained + step peak,
  exactly; the registry's ``footprint`` adds the step peak to the own pages instead),
  ``live_bytes`` ({after_forward, after_backward}, above the step's start),
  ``breakdown_bytes`` / ``breakdown_method`` ({params, inputs, gradients,
  optimizer_state, saved_activations, temporaries}: bytes or null, and how each was
  counted or why it is null; harness/measure/breakdown.py),
  ``tracemalloc_peak_bytes`` (phases), ``bound_bytes``, ``device_memory`` (CUDA: the
  same three from the framework's allocator, NVML beside them); time: ``time_s``
  (medians), ``time_spread_s`` (interquartile range; both null when no time pass ran:
  the memory-only records of `harness scale`), ``compile_s``; ``grad_rel_err`` (and
  ``grad_kink``: where the run agreed with the truth at a relu kink's other side,
  harness/measure/kinks.py),
  ``timeline`` ({t_s, rss_bytes, marks});
  later additions: ``time_min_s``, ``cpu_time_s`` (process CPU time, user + sys,
  median per phase), ``time_noisy`` (bool: the time is advisory, ``time_noise`` says
  why) and ``time_stats`` (samples, how many were clean, the median's precision, other
  processes' CPU use);
  ``leak`` (memory that grows every step: {verdict: flat | settles | grows |
  inconclusive, bytes_per_step, whole_per_step, halves_per_step, p, steps, extended,
  samples, source, stopped?}; harness/measure/leak.py);
  ``prediction`` (the framework's own prediction of the step, taken
  after the measured steps: {state: predicted | zero | unsupported | failed, method,
  bytes, compares_with, program, same_program, fields, categories, note, reason};
  absent or null: none was taken; harness/measure/prediction.py);
  ``saved_by_op`` ({ops: {op: {bytes, count, names, in_op_set}} or
  null, bytes, method, saved_activations_bytes, backward}: which op made each saved
  activation, and what the backward shows where the framework lets us see;
  harness/measure/saved_ops.py);
- ``provenance``: versions, git commit, machine, python, the worker environment,
  threads, seed, start time, and how each figure was taken.

Files are only ever changed by `append_record`, which replaces the whole file
atomically under a lock (see there), so a reader or a killed sweep never sees half a
record and two sweeps never lose each other's. Readers of files that may have been
damaged elsewhere (a hand edit, a bad copy) use `scan_records`: each bad line is named
with its file and line and skipped (docs/faults.md).
"""

import contextlib
import fcntl
import json
import math
import os
import stat
import sys
import tempfile
from typing import NamedTuple

SCHEMA = 2
CELL_KEYS = ("workload", "size", "dtype", "framework", "mode", "device")
VARIANT_KEYS = ("optimizer", "remat", "order", "batch")
STATUSES = ("ok", "oom", "timeout", "error", "unavailable")
PHASES = ("forward", "backward", "step", "total")
LIVE_KEYS = ("after_forward", "after_backward")
BREAKDOWN_KEYS = ("params", "inputs", "gradients", "optimizer_state", "saved_activations", "temporaries")
#: one measured step's fields, as harness/measure/memory_meter.py gives them: the record
#: holds the steady step's under these names and the cold first step's with FIRST_STEP
#: before each (one definition for both)
STEP_FIELDS = ("retained_bytes", "retained_detail_bytes", "peak_bytes", "peak_file_bytes", "footprint_bytes",
               "live_bytes")
FIRST_STEP = "first_step_"


def first_step(field):
    """The record's name of the cold first step's `field` (a STEP_FIELDS name)."""
    return FIRST_STEP + field


#: (retained, step peak, footprint) keys of the steady state and of the first step
MEMORY_FIGURES = tuple((prefix + "retained_bytes", prefix + "peak_bytes", prefix + "footprint_bytes")
                       for prefix in ("", FIRST_STEP))
#: metrics an "ok" record must carry (values may be null where the schema says so)
OK_KEYS = (
    "retained_bytes",
    "peak_bytes",
    "footprint_bytes",
    "first_step_retained_bytes",
    "first_step_peak_bytes",
    "first_step_footprint_bytes",
    "live_bytes",
    "breakdown_bytes",
    "breakdown_method",
    "bound_bytes",
    "tracemalloc_peak_bytes",
    "device_memory",
    "time_s",
    "time_spread_s",
    "compile_s",
    "grad_rel_err",
    "timeline",
)
#: a record's fields as its passes give them, the one list: the sweep copies each from
#: the pass's result as it is (harness/sweep/cell_runner.py); harness/figures.py says
#: how each figure is read from them
MEMORY_PASS_FIELDS = (
    *STEP_FIELDS, *(first_step(field) for field in STEP_FIELDS),
    "breakdown_bytes", "breakdown_method", "bound_bytes", "bound_source", "tracemalloc_peak_bytes", "device_memory",
    "grad_rel_err", "grad_check", "grad_kink", "step_kind", "step_program", "buffer_cache", "prediction", "leak",
    "steady_samples", "saved_by_op",
)
TIME_PASS_FIELDS = (
    "time_s", "time_spread_s", "compile_s", "first_step_time_s", "time_samples_s", "time_min_s", "cpu_time_s",
    "time_noisy", "time_noise", "time_stats",
)
PROVENANCE_KEYS = ("versions", "git_commit", "machine", "python", "env", "threads", "seed", "started_at")


class SchemaError(ValueError):
    """A record that does not follow the schema; the message names the key."""


class RecordFileError(ValueError):
    """A result file that cannot be read; the message says where."""


def new_record(cell, status, message="", provenance=None, **metrics):
    """A record for `cell` (a dict with CELL_KEYS and optionally VARIANT_KEYS).

    A record whose status is not "ok" carries no metrics, only why (`message`).
    """
    if status not in STATUSES:
        raise SchemaError(f"unknown status {status!r}; valid statuses: {', '.join(STATUSES)}")
    record = {"schema": SCHEMA}
    for key in CELL_KEYS:
        record[key] = cell[key]
    record["optimizer"] = cell.get("optimizer")
    record["remat"] = cell.get("remat") or "none"
    record["order"] = cell.get("order")
    record["batch"] = cell.get("batch")
    # the framework version asked for (null: the one installed beside gradmem) and the
    # exact version that ran (null where unknown: the framework is not installed)
    record["version"] = cell.get("version")
    record["framework_version"] = framework_version(cell, provenance)
    record["status"] = status
    record["message"] = message or ""
    if status == "ok":
        for key in OK_KEYS:
            record[key] = metrics.pop(key, None)
    record.update(metrics)
    record["provenance"] = provenance or {}
    return record


def framework_version(cell, provenance):
    """The exact version of the cell's framework that ran, from the provenance's
    versions (the framework's own distribution: tensorflow-cpu for tensorflow)."""
    versions = (provenance or {}).get("versions") or {}
    name = cell.get("framework")
    for dist in (name, f"{name}-cpu"):
        if versions.get(dist):
            return versions[dist]
    return cell.get("version")


def schema_mismatch(found):
    """Why a record of schema `found` cannot be read here, naming both schemas."""
    if found is None:
        return f"record has no 'schema' key; this gradmem reads schema {SCHEMA} records"
    text = f"record of schema {found!r}, but this gradmem reads schema {SCHEMA}"
    if isinstance(found, int) and not isinstance(found, bool):
        if found > SCHEMA:
            return f"{text}: it was written by a newer gradmem (update this checkout to read it)"
        older = f"{text}: it was written by an older gradmem (re-run its cells to measure them with this one)"
        return older + (SCHEMA_1_SPLIT if found == 1 else "")
    return text


#: why a schema-1 record cannot be converted (docs/measurement.md, "Migration")
SCHEMA_1_SPLIT = (
    "; its peak_bytes summed what the framework keeps and what the step needs, which schema 2 "
    "splits (retained_bytes, peak_bytes, footprint_bytes) with figures schema 1 did not record"
)


def validate(record):
    """Raise SchemaError unless `record` follows schema 2; return it."""
    if not isinstance(record, dict):
        raise SchemaError(f"a record is a JSON object, got {type(record).__name__}")
    if record.get("schema") != SCHEMA:
        raise SchemaError(schema_mismatch(record.get("schema")))
    for key in CELL_KEYS + ("status", "message", "provenance"):
        if key not in record:
            raise SchemaError(f"record lacks {key!r}")
    for key in CELL_KEYS:
        if not isinstance(record[key], str):
            raise SchemaError(f"{key} must be a string, got {record[key]!r}")
    if record["status"] not in STATUSES:
        raise SchemaError(f"status {record['status']!r} is not one of {', '.join(STATUSES)}")
    if record["status"] != "ok":
        if not record["message"]:
            raise SchemaError(f"a {record['status']!r} record must say why (message is empty)")
        return record
    for key in OK_KEYS:
        if key not in record:
            raise SchemaError(f"an ok record lacks {key!r}")
    for retained, peak, footprint in MEMORY_FIGURES:
        _check_memory_figures(record, retained, peak, footprint)
        _check_retained_detail(record, retained)
    _check_breakdown(record)
    if record["time_s"] is not None or record["time_spread_s"] is not None:  # null: no time pass
        _check_phases(record, "time_s", float, required=True)
        _check_phases(record, "time_spread_s", float, required=True)
    batch = record.get("batch")
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise SchemaError(f"batch must be null or a positive int, got {batch!r}")
    for key in ("time_min_s", "cpu_time_s"):  # absent from older records
        if record.get(key) is not None:
            _check_phases(record, key, float, required=True)
    if record.get("time_noisy") not in (None, True, False):  # null: no time pass, or older records
        raise SchemaError(f"time_noisy must be true, false or null, got {record['time_noisy']!r}")
    if record["tracemalloc_peak_bytes"] is not None:
        _check_phases(record, "tracemalloc_peak_bytes", int, required=True)
    if record.get("bound_source") == "absent" and record["bound_bytes"] is None:
        pass  # a native step without bound_bytes(cfg) has none (harness/steps/contract.py)
    elif not isinstance(record["bound_bytes"], int) or record["bound_bytes"] <= 0:
        raise SchemaError(f"bound_bytes must be a positive int, got {record['bound_bytes']!r}")
    live = record["live_bytes"]
    if not isinstance(live, dict) or set(live) - set(LIVE_KEYS):
        raise SchemaError(f"live_bytes keys must be among {LIVE_KEYS}, got {live!r}")
    device = record["device_memory"]
    if isinstance(device, dict) and device.get("peak_bytes") is not None:
        _check_memory_figures(device, "retained_bytes", "peak_bytes", "footprint_bytes", where="device_memory.")
    for key in PROVENANCE_KEYS:
        if key not in record["provenance"]:
            raise SchemaError(f"provenance lacks {key!r}")
    return record


def _check_memory_figures(record, retained, peak, footprint, where=""):
    """retained is an int, peak and footprint int phases with the same phases, and
    footprint = retained + peak exactly, per phase."""
    if not _is_int(record[retained]):
        raise SchemaError(f"{where}{retained} must be an int, got {record[retained]!r}")
    _check_phases(record, peak, int, required=True, where=where)
    _check_phases(record, footprint, int, required=True, where=where)
    if set(record[peak]) != set(record[footprint]):
        raise SchemaError(f"{where}{footprint} phases {sorted(record[footprint])} != {peak} phases {sorted(record[peak])}")
    for phase, value in record[peak].items():
        if value is not None and record[footprint][phase] != record[retained] + value:
            raise SchemaError(
                f"{where}{footprint}[{phase!r}] = {record[footprint][phase]} is not {retained} + {peak}[{phase!r}]"
                f" = {record[retained]} + {value}"
            )


def _check_retained_detail(record, retained):
    """The optional split of retained by kind of page adds up to it exactly."""
    key = retained.replace("retained_bytes", "retained_detail_bytes")
    detail = record.get(key)
    if detail is None:
        return
    if not isinstance(detail, dict) or not all(_is_int(v) for v in detail.values()):
        raise SchemaError(f"{key} must be an object of ints, got {detail!r}")
    if sum(detail.values()) != record[retained]:
        raise SchemaError(f"{key} {detail} does not add up to {retained} = {record[retained]}")


def _check_breakdown(record):
    values, methods = record["breakdown_bytes"], record["breakdown_method"]
    for key, value in (("breakdown_bytes", values), ("breakdown_method", methods)):
        if not isinstance(value, dict) or set(value) != set(BREAKDOWN_KEYS):
            raise SchemaError(f"{key} must have exactly the keys {', '.join(BREAKDOWN_KEYS)}, got {value!r}")
    for name in BREAKDOWN_KEYS:
        if values[name] is not None and (not _is_int(values[name]) or values[name] < 0):
            raise SchemaError(f"breakdown_bytes[{name!r}] must be a non-negative int or null, got {values[name]!r}")
        if not isinstance(methods[name], str) or not methods[name].strip():
            raise SchemaError(f"breakdown_method[{name!r}] must say how it was counted (or why it is null)")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_phases(record, key, kind, required, where=""):
    value = record[key]
    key = f"{where}{key}"
    if not isinstance(value, dict):
        raise SchemaError(f"{key} must be an object of phases, got {value!r}")
    unknown = set(value) - set(PHASES)
    if unknown:
        raise SchemaError(f"{key} has unknown phases {sorted(unknown)}; valid phases: {', '.join(PHASES)}")
    if required and value.get("total") is None:
        raise SchemaError(f"{key} lacks 'total'")
    for phase, number in value.items():
        if number is None:
            continue
        ok = isinstance(number, (int, float)) and not isinstance(number, bool)
        if not ok or (kind is int and not isinstance(number, int)) or not math.isfinite(number):
            raise SchemaError(f"{key}[{phase!r}] must be a finite {kind.__name__}, got {number!r}")


# ---- files ---------------------------------------------------------------------------
def dumps(record):
    """One JSONL line (no NaN/Infinity: they are not JSON)."""
    return json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"


@contextlib.contextmanager
def _locked(path):
    """An exclusive flock on `path`.lock for one read-modify-replace of `path`: two
    sweeps appending to one file do not lose each other's records.

    The lock file is removed while the lock is still held, so none is left beside the
    file after an append. A writer that was waiting on the removed file then holds a
    lock on a file no longer at that name: it sees so (the name's inode is another, or
    none) and locks the file now there, so two writers never both pass. One killed
    while holding it leaves the file, which the next append uses and removes."""
    lock_path = f"{path}.lock"
    while True:
        lock = open(lock_path, "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = os.fstat(lock.fileno())
            try:
                named = os.stat(lock_path)
            except FileNotFoundError:
                named = None
        except BaseException:
            lock.close()
            raise
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            break
        lock.close()  # the lock of a removed file: take the one at the name now
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)  # before letting go: a waiter on it then looks again
        lock.close()  # lets go of the lock


def append_record(path, record):
    """Append `record` to the JSONL file at `path`, atomically.

    Why this is safe: the new content (old bytes + one line) is written to a temporary
    file in the same directory, flushed and fsync'ed, then renamed over `path` with
    os.replace, which POSIX makes atomic on one file system. At every instant `path`
    is either the old complete file or the new complete file; a process killed at any
    point leaves one of the two (and at worst a stray temporary file, never read).
    """
    line = dumps(record)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with _locked(path):
        try:
            with open(path, "rb") as handle:
                old = handle.read()
        except FileNotFoundError:
            old = b""
        if old and not old.endswith(b"\n"):
            raise RecordFileError(f"{path}: does not end with a newline; not a file this harness wrote")
        _replace_whole(path, old + line.encode("utf-8"))


def _replace_whole(path, payload):
    """`path` becomes `payload` (bytes) whole or not at all: a temporary file in the same
    directory, flushed and fsync'ed, renamed over `path` (atomic on one file system),
    then the directory fsync'ed; a process killed at any point leaves the old file or
    the new one (at worst a stray temporary file, never read). The file keeps the mode
    it had; a new one gets what open() would give it (0666 less the umask: 0644
    usually), not the temporary file's owner-only 0600."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _umask():
    """This process's umask, read without setting it (os.umask can only set, and setting
    it for a moment would give a file another thread makes then the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc (not Linux): set and put back
    os.umask(mask)
    return mask


def _fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path, text):
    """Write a page (HTML, text) to `path` with the same temp + os.replace protocol,
    with a new file's usual mode (0644 under the usual umask)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _replace_whole(path, text.encode("utf-8"))


def write_json_atomic(path, payload):
    """Write one JSON document to `path` with the same temp + os.replace protocol."""
    _replace_whole(path, json.dumps(payload, allow_nan=False).encode("utf-8"))


def write_records(path, records):
    """Replace the JSONL file at `path` with `records`, whole or not at all (the
    temp + os.replace protocol of `append_record`, under its lock)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    payload = "".join(dumps(record) for record in records).encode("utf-8")
    with _locked(path):
        _replace_whole(path, payload)


def write_lines(path, lines):
    """Replace the JSONL file at `path` with `lines` (each its newline at its end), byte
    for byte, whole or not at all, under `append_record`'s lock: for a rewrite that keeps
    lines it does not parse (a damaged one stays as it was)."""
    path = os.fspath(path)
    with _locked(path):
        _replace_whole(path, "".join(lines).encode("utf-8"))


def read_records(path):
    """Every record of the JSONL file at `path`, in file order; RecordFileError at the
    first line that is not JSON (strict: for files a test just wrote). Readers of files
    that may be damaged use `scan_records`."""
    records, damaged = scan_records(path, check=False)
    if damaged:
        raise RecordFileError(str(damaged[0]))
    return records


class Damaged(NamedTuple):
    """A line of a result file that is not a valid record."""

    path: str
    line: int
    reason: str

    def __str__(self):
        return f"{self.path}:{self.line}: {self.reason}"


def scan_records(path, check=True):
    """(records, damaged): the records of the JSONL file at `path` in file order, and a
    Damaged (file, line, why) for each line that is not one: not JSON (a truncated write,
    a hand edit), not an object, or (with `check`) not following this schema
    (`validate`: another schema's record is named as such). A damaged line never hides
    the others. RecordFileError only when the file cannot be read at all."""
    records, damaged = [], []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    damaged.append(Damaged(path, number, f"not a JSON record ({err.msg}, column {err.colno})"))
                    continue
                try:
                    if check:
                        validate(record)
                    elif not isinstance(record, dict):
                        raise SchemaError(f"a record is a JSON object, got {type(record).__name__}")
                except SchemaError as err:
                    damaged.append(Damaged(path, number, str(err)))
                    continue
                records.append(record)
    except FileNotFoundError:
        raise RecordFileError(f"{path}: no such result file") from None
    except (IsADirectoryError, PermissionError) as err:
        raise RecordFileError(f"{path}: cannot read it ({err.strerror})") from None
    return records, damaged


def warn_damaged(damaged, stream=None):
    """Say on stderr which lines were skipped and why, one per line."""
    stream = stream or sys.stderr
    for item in damaged:
        print(f"warning: {item} (line skipped)", file=stream)
    if damaged:
        files = len({item.path for item in damaged})
        print(f"warning: {len(damaged)} damaged line(s) in {files} file(s) skipped; every other record is used",
              file=stream)
        stream.flush()


def check_appendable(path):
    """Raise RecordFileError now, before anything is measured, when records could not
    be appended to `path`: its directory cannot be made or written, or the file does not
    end with a newline (its last line is cut: not a file this harness wrote whole)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as err:
        raise RecordFileError(f"{path}: cannot make its directory ({err.strerror})") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise RecordFileError(f"{path}: its directory {directory} is not writable")
    if os.path.isdir(path):
        raise RecordFileError(f"{path}: is a directory, not a result file")
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
    except FileNotFoundError:
        return
    except OSError as err:
        raise RecordFileError(f"{path}: cannot read it ({err.strerror})") from None
    if last != b"\n":
        raise RecordFileError(
            f"{path}: does not end with a newline (its last line is cut: a hand edit, or not a file "
            f"this harness wrote); repair it or choose another --out"
        )
