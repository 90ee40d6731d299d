"""What every asv benchmark shares: the parameter grid and the one harness sweep.

asv runs `sweep()` once per (environment, commit) as `setup_cache`: it starts
`python -m harness run` in a subprocess (every cell then runs in its own fresh worker
process, see docs/design.md) and hands the records to every `track_*`, which only looks
its figure up. asv's own `peakmem_` would count the framework imports and the asv
parent's peak, so no benchmark here measures anything in the asv process.

The grid is read from the registries' source in this checkout (`registry()`), not
imported from `harness`: asv runs the working copy's benchmarks over whatever commit
it installed (`asv find`), so an old commit's package never shapes the grid, and a new
framework or workload joins it with its registry line.

Environment (read in the benchmark processes, so export it before `asv run`):
  GRADMEM_ASV_SIZE        tiny | small (default) | paper: the sweep's size
  GRADMEM_ASV_FRAMEWORKS  comma list, default all: which frameworks the sweep runs
  GRADMEM_ASV_WORKLOADS   comma list, default all; besides the built-in names, your own
                          workloads (docs/workloads.md): an absolute path to a .py file
                          or package.module:attr, each added to the grid as a workload
  GRADMEM_ASV_DEVICES     comma list, default all (cuda cells are n/a without a GPU)
  GRADMEM_ASV_MODES       comma list, default all
  GRADMEM_ASV_OPTIMIZER   sgd (default) | adam | none: the update measured as phase "step"
  GRADMEM_ASV_RECORDS     a JSONL result file to publish instead of sweeping (a sweep
                          you ran yourself at the commit you pass to --set-commit-hash)
  GRADMEM_ASV_KEEP        copy the sweep's JSONL records here (for `python -m harness
                          report`: the comparison page of exactly the figures asv stored)
Cells outside the selection, unavailable, failed or without a figure are NaN (n/a).
"""

import ast
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile


class SelectionError(ValueError):
    """A GRADMEM_ASV_* variable naming something that does not exist."""


CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: `harness run`'s exit statuses of a sweep that ran to its end: 0, 3 (no cell measured),
#: 4 (some cells failed); harness/sweep/outcome.py RAN_TO_THE_END
SWEEP_RAN = (0, 3, 4)


def registry(path, name):
    """The literal assigned to `name` in `path` (relative to this checkout), as a list
    (a dict gives its keys), read with `ast` so that nothing is imported."""
    with open(os.path.join(CHECKOUT, path), encoding="utf-8") as handle:
        module = ast.parse(handle.read(), path)
    for node in module.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError(f"{path} assigns no literal {name}")


BUILT_IN_WORKLOADS = registry("harness/workloads/__init__.py", "NAMES")
HASH_MARK = "#sha256="  # how a record names a file workload: /abs/path.py#sha256=<hex>


def is_own_workload(name):
    """A user's workload reference: a .py path or module:attr (as the harness's
    loader reads them; written out here, like the grid, so an old commit still imports)."""
    return name.endswith(".py") or ":" in name


def own_workloads():
    """The user's workloads named in GRADMEM_ASV_WORKLOADS: grid values of their own.
    A file must be given by its absolute path: asv runs benchmarks from its own folders."""
    names = [n.strip() for n in os.environ.get("GRADMEM_ASV_WORKLOADS", "").split(",") if n.strip()]
    own = [n for n in names if is_own_workload(n)]
    for name in own:
        if name.endswith(".py") and not os.path.isabs(name):
            raise SelectionError(f"GRADMEM_ASV_WORKLOADS: {name!r} is not an absolute path; asv runs "
                                 "benchmarks from its own folders, so give the file as /abs/path.py")
    return own
WORKLOADS = BUILT_IN_WORKLOADS + own_workloads()
FRAMEWORKS = registry("harness/frameworks/__init__.py", "ADAPTERS")
DEVICES = registry("harness/choices.py", "DEVICES")
MODES = registry("harness/choices.py", "MODES")
SIZES = registry("harness/choices.py", "SIZES")
OPTIMIZERS = registry("harness/choices.py", "OPTIMIZERS") + ["none"]

PARAMS = [WORKLOADS, FRAMEWORKS, DEVICES, MODES]
PARAM_NAMES = ["workload", "framework", "device", "mode"]

# Bump when the meaning of a figure changes (harness method, sweep settings), so asv
# stops comparing new figures with old ones instead of showing a false step.
# gradmem-3: compiled JAX and PyTensor cells measure one program (no phase
# split), MLX and tinygrad memory passes run with their buffer caches off.
VERSION = "gradmem-3"
SWEEP_TIMEOUT_S = 4 * 3600  # a `small` sweep of every cell, on a slow CI box




def _selection(variable, valid, default=None):
    text = os.environ.get(variable, "")
    if not text.strip() or text.strip() == "all":
        return list(default or valid)
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in valid:
            raise SelectionError(f"{variable}: unknown {name!r}; valid: {', '.join(valid)}")
    return names


def size():
    return _selection("GRADMEM_ASV_SIZE", SIZES, ["small"])[0]


def optimizer():
    """The optimizer of the sweep, None for none."""
    name = _selection("GRADMEM_ASV_OPTIMIZER", OPTIMIZERS, ["sgd"])[0]
    return None if name == "none" else name


def sweep_command(out_path):
    """The `python -m harness run` command line of the sweep this environment asks for."""
    return [
        sys.executable, "-m", "harness", "run",
        "--size", size(),
        "--workloads", ",".join(_selection("GRADMEM_ASV_WORKLOADS", WORKLOADS)),
        "--frameworks", ",".join(_selection("GRADMEM_ASV_FRAMEWORKS", FRAMEWORKS)),
        "--devices", ",".join(_selection("GRADMEM_ASV_DEVICES", DEVICES)),
        "--modes", ",".join(_selection("GRADMEM_ASV_MODES", MODES)),
        *(["--optimizer", optimizer()] if optimizer() else []),
        "--quiet",
        "--out", out_path,
    ]


def read_records(path):
    """The records of a JSONL result file. A damaged line (cut short, hand-edited, of
    another schema) is named on stderr with its file and line and skipped, where the
    harness under test can tell (harness.results.scan_records); older commits read as
    they could."""
    try:
        from harness.results import scan_records, warn_damaged
    except ImportError:
        try:
            from harness.results import read_records as strict
        except ImportError:  # an old commit without harness.results: the JSONL is the contract
            with open(path, encoding="utf-8") as handle:
                return [json.loads(line) for line in handle if line.strip()]
        return strict(path)
    records, damaged = scan_records(path)
    warn_damaged(damaged)
    return records


def index(records):
    """{(workload, framework, device, mode): record} for the default variant of each cell.

    Variants the asv grid has no axis for (another size, dtype or optimizer,
    rematerialisation, another backward order, a pinned framework version) are left out
    rather than mixed in.
    """
    cells = {}
    wanted_size = size()
    for record in records:
        if record.get("size") != wanted_size or record.get("dtype", "float32") != "float32":
            continue
        if record.get("remat") not in (None, "none") or record.get("order") not in (None, "heap"):
            continue
        if record.get("version"):  # a pinned framework version: not the grid's installed one
            continue
        if record.get("optimizer") != optimizer():
            continue
        key = (grid_workload(record["workload"]), record["framework"], record["device"], record["mode"])
        cells[key] = record
    return cells


def grid_workload(name):
    """The grid's value of a record's workload: a file workload's record names the file
    with its hash (the harness's canonical reference), the grid by its path."""
    return name.split(HASH_MARK)[0] if HASH_MARK in name else name


def sweep():
    """setup_cache: one harness sweep, its records indexed by cell."""
    given = os.environ.get("GRADMEM_ASV_RECORDS")
    if given:
        return index(read_records(given))
    tmp = tempfile.mkdtemp(prefix="gradmem-asv-")
    try:
        out = os.path.join(tmp, "sweep.jsonl")
        returncode, output = run_sweep(sweep_command(out))
        # Cells that fail are records with a status (NaN here); a sweep that did not run
        # to its end is a broken harness. A sweep with failed cells exits 3 (none
        # measured) or 4 (some): harness/sweep/outcome.py, not imported (see above).
        if returncode not in SWEEP_RAN or not os.path.exists(out):
            raise RuntimeError(f"harness sweep failed ({returncode}):\n{output[-4000:]}")
        keep = os.environ.get("GRADMEM_ASV_KEEP")
        if keep:
            shutil.copyfile(out, keep)
        return index(read_records(out))
    except Stopped as stop:
        shutil.rmtree(tmp, ignore_errors=True)
        signal.signal(stop.signum, signal.SIG_DFL)
        os.kill(os.getpid(), stop.signum)  # die of it, as asv expects of a killed benchmark
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- a sweep that ends with this process ---------------------------------------------
# asv's timeout sends SIGTERM to this process's group (the sweep is in it too) and
# SIGKILL a second later. The sweep then kills its workers and removes its own
# temporary directory (harness/interrupts.py); this process waits for it,
# removes the records' directory and dies of the same signal. If this process is
# SIGKILLed first, the kernel sends the sweep SIGTERM (PR_SET_PDEATHSIG).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
STOP_WAIT_S = 0.8  # asv's SIGKILL follows its SIGTERM after 1 s


class Stopped(BaseException):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _stopped(signum, frame):
    raise Stopped(signum)


def run_sweep(command):
    """(exit code, output) of the sweep `command`; Stopped if a signal came meanwhile."""
    parent = os.getpid()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: _end_with(parent))
    previous = {signum: signal.signal(signum, _stopped) for signum in STOP_SIGNALS}
    try:
        output, _ = proc.communicate()
        return proc.returncode, output
    except Stopped as stop:
        proc.send_signal(stop.signum)  # if only this process was told
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _end_with(parent):
    """In the sweep's process before exec: SIGTERM when its parent dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl
        os.kill(os.getpid(), signal.SIGTERM)


sweep.timeout = SWEEP_TIMEOUT_S


def figure(cache, cell, name):
    """The cell record's figure `name` (harness/figures.py: a CUDA cell's memory figures
    are its device allocator's), or NaN (asv: n/a) when the cell was not swept, did not
    run, or has no such figure."""
    record = cache.get(tuple(cell))
    try:
        from harness import figures
    except ImportError:  # `asv find` on a commit older than the registry
        value = _figure_before_registry(record, name)
    else:
        value = figures.value(record, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return math.nan
    return value


#: where the figures lay in the records of gradmem commits older than the figure registry
#: (CPU figures only: those commits showed no device figure), for `asv find` across them
_PATHS_BEFORE_REGISTRY = {
    "step_peak": ("peak_bytes", "total"), "retained": ("retained_bytes",), "footprint": ("footprint_bytes", "total"),
    "first_step_peak": ("first_step_peak_bytes", "total"),
    "first_step_footprint": ("first_step_footprint_bytes", "total"),
    "saved_activations": ("breakdown_bytes", "saved_activations"), "live.after_backward": ("live_bytes", "after_backward"),
    "time": ("time_s", "total"), "first_step_time": ("compile_s",),
    **{f"{f}.{p}": (k, p) for f, k in (("step_peak", "peak_bytes"), ("time", "time_s"))
       for p in ("forward", "backward", "step")},
}


def _figure_before_registry(record, name):
    if not record or record.get("status") != "ok" or name not in _PATHS_BEFORE_REGISTRY:
        return None
    value = record
    for key in _PATHS_BEFORE_REGISTRY[name]:
        value = value.get(key) if isinstance(value, dict) else None
    return value


class Grid:
    """Base of every benchmark class: the cell grid and the shared sweep."""

    params = PARAMS
    param_names = PARAM_NAMES
    setup_cache = staticmethod(sweep)
    timeout = SWEEP_TIMEOUT_S
    version = VERSION
