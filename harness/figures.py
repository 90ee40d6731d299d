"""What a cell's figures are, and how each is read from a record: the one place.

Every reader (the page, the run's table, `diff`, the release detector, `bisect`,
`scale`, the asv benchmarks, the prediction's ratio, the breakdown) takes a cell's
figures from here and never from the record's keys, so a figure means the same in
every row, mode and device.

A record's memory figures come from one **source**, chosen by its device:

- ``host``: a CPU cell. The process's resident memory (clear_refs + VmHWM) above the
  step's start (harness/measure/memory_meter.py).
- ``device``: a CUDA cell whose adapter reads the framework's allocator
  (``device_memory``, harness/measure/cuda.py). The host's RSS of such a cell is a
  figure of its own (``host_step_peak``, ``host_retained``), never its headline.
- none: a CUDA cell whose adapter gives no device figure. Its memory figures are absent
  (`source(record).reason` says why), never its host figures in their place.

A device peak from an allocator that cannot reset its peak (JAX: jax#8096) is an
**upper bound** unless the record shows that the process's peak rose during that very
phase (then the step set it, and the figure is exact: `upper_bound`). Readers mark an
upper bound as one and never colour it best.

A NumPy row's **time** on a host that pins OpenBLAS's kernels (`forced_blas`: some
hosts set OPENBLAS_CORETYPE because older OpenBLAS builds miscompute on their CPU) is
the time of those kernels, not of NumPy as installed; readers mark it as such.

A new figure is one `Figure` line here (and, if it is shown, its column).
"""

from dataclasses import dataclass

from harness.units import MIB

PHASES = ("forward", "backward", "step", "total")

#: a figure's kind: which source it follows
MEMORY = "memory"  # the cell's memory source: host RSS on CPU, the allocator on CUDA
HOST = "host"  # the process's RSS, on every device
DEVICE = "device"  # the device allocator or NVML alone (absent on CPU)
CELL = "cell"  # not memory: time, gradient error, the bound (the same on every device)


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str  # "bytes" | "seconds" | "ratio"
    kind: str  # MEMORY | HOST | DEVICE | CELL
    host: tuple = ()  # path into the record (MEMORY, HOST, CELL)
    device: tuple = ()  # path into record["device_memory"] (MEMORY, DEVICE)
    meaning: str = ""
    better: str = "lower"
    peak: bool = False  # a peak (or a sum with one): an upper bound where the allocator cannot reset

    @property
    def phase(self):
        path = self.device or self.host
        return path[-1] if path and path[-1] in PHASES else None


def _phased(name, label, host_key, device_path, meaning, kind=MEMORY):
    """The figure over the whole step (`name`) and one per phase (`name.forward` ...)."""
    return [Figure(name if phase == "total" else f"{name}.{phase}",
                   label if phase == "total" else f"{label} ({phase})", "bytes", kind,
                   (host_key, phase) if host_key else (),
                   tuple(device_path) + (phase,) if device_path is not None else (), meaning, peak=True)
            for phase in ("total",) + PHASES[:-1]]


_STEP_PEAK = "what one steady step needs: its peak above the bytes resident at its start"
_FOOTPRINT = "retained + step peak: what the process needs above its inputs"
_FIRST = "the cold first step (tracing, compiling, caches filled)"
_TABLE = [
    *_phased("step_peak", "step peak", "peak_bytes", ("peak_bytes",), _STEP_PEAK),
    *_phased("footprint", "footprint", "footprint_bytes", ("footprint_bytes",), _FOOTPRINT),
    Figure("retained", "retained", "bytes", MEMORY, ("retained_bytes",), ("retained_bytes",),
           "what the framework keeps between steps: resident at a steady step's start above the baseline"),
    *_phased("first_step_peak", "first-step peak", "first_step_peak_bytes", ("first_step", "peak_bytes"),
             f"step peak of {_FIRST}"),
    *_phased("first_step_footprint", "first-step footprint", "first_step_footprint_bytes",
             ("first_step", "footprint_bytes"), f"retained + peak of {_FIRST}"),
    Figure("first_step_retained", "first-step retained", "bytes", MEMORY, ("first_step_retained_bytes",),
           ("first_step", "retained_bytes"), f"retained at the start of {_FIRST}"),
    # the process's RSS whatever the device: on a CUDA cell, what the host needed
    *_phased("host_step_peak", "host RSS step peak", "peak_bytes", None,
             "the process's resident memory: the step's peak above its start", kind=HOST),
    Figure("host_retained", "host RSS retained", "bytes", HOST, ("retained_bytes",), (),
           "the process's resident memory at a steady step's start above the baseline"),
    *_phased("tracemalloc_peak", "tracemalloc peak", "tracemalloc_peak_bytes", None,
             "Python's tracemalloc peak of one more step (NumPy-based engines)", kind=HOST),
    Figure("live.after_forward", "live after forward", "bytes", MEMORY, ("live_bytes", "after_forward"), (),
           "resident above the step's start when the forward ends (host RSS; none on a device)"),
    Figure("live.after_backward", "live after backward", "bytes", MEMORY, ("live_bytes", "after_backward"), (),
           "resident above the step's start when the backward ends (host RSS; none on a device)"),
    Figure("saved_activations", "saved activations", "bytes", CELL, ("breakdown_bytes", "saved_activations"), (),
           "what the forward keeps for the backward, counted as the record's breakdown_method says"),
    # the device's own figures beside the allocator's
    Figure("allocator_step_peak", "allocator step peak", "bytes", DEVICE, (), ("peak_bytes", "total"),
           "the device allocator's step peak (none on a CPU cell)", peak=True),
    *_phased("reserved", "reserved", None, ("reserved_bytes",),
             "the allocator's cache at its highest during the step, absolute: what it holds from the "
             "device, allocated or not", kind=DEVICE),
    Figure("nvml", "NVML (process)", "bytes", DEVICE, (), ("nvml_peak_bytes",),
           "NVML's device memory of the process at its highest during the step, polled: the CUDA "
           "context, the allocator's cache and every library's buffers"),
    # not memory: the same on every device
    Figure("bound", "bound", "bytes", CELL, ("bound_bytes",), (),
           "the bytes a store-everything reverse pass keeps (the workload's derivation)"),
    Figure("time", "time", "seconds", CELL, ("time_s", "total"), (), "median time of one steady step"),
    Figure("time.forward", "time (forward)", "seconds", CELL, ("time_s", "forward"), ()),
    Figure("time.backward", "time (backward)", "seconds", CELL, ("time_s", "backward"), ()),
    Figure("time.step", "time (update)", "seconds", CELL, ("time_s", "step"), ()),
    Figure("first_step_time", "first-step time", "seconds", CELL, ("compile_s",), (),
           "the cold first step's time (tracing, compiling)"),
    Figure("predicted", "predicted", "bytes", CELL, ("prediction", "bytes"), (),
           "the framework's own prediction of the step (its compiler's plan): never a measurement"),
    Figure("grad_rel_err", "gradient error", "ratio", CELL, ("grad_rel_err",), (),
           "relative error of the gradient against the float64 reference engine"),
]
FIGURES = {figure.name: figure for figure in _TABLE}


class UnknownFigure(KeyError):
    def __str__(self):
        return f"unknown figure {self.args[0]!r}; valid figures: {', '.join(FIGURES)}"


def get(name):
    try:
        return FIGURES[name]
    except KeyError:
        raise UnknownFigure(name) from None


@dataclass(frozen=True)
class Source:
    """Where a record's memory figures come from."""

    kind: str | None  # "host", "device" or None (no memory figure)
    label: str  # what a reader is told, e.g. "device allocator (torch.cuda)"
    reason: str = ""  # why there is none (kind None)


HOST_SOURCE = Source("host", "host RSS (clear_refs + VmHWM)")


def source(record):
    """The source of `record`'s memory figures (see the module's docstring)."""
    if (record.get("device") or "cpu") == "cpu":
        return HOST_SOURCE
    device = record.get("device_memory")
    if isinstance(device, dict) and device:
        return Source("device", f"device allocator ({device.get('method') or record.get('framework')})")
    return Source(None, "none", f"{record.get('framework')}'s adapter gives no {record.get('device')} allocator "
                  "figure; the process's host RSS is not its device memory")


def _walk(value, path):
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def value(record, name):
    """The figure `name` of `record` (a number), or None: not ok, not measured, not
    this source's (a device figure of a CPU cell), or no source (see `source`)."""
    figure = get(name)
    if not record or record.get("status", "ok") != "ok":
        return None
    if figure.kind in (HOST, CELL):
        return _walk(record, figure.host)
    kind = source(record).kind
    if figure.kind == DEVICE:
        return _walk(record.get("device_memory"), figure.device) if kind == "device" else None
    if kind == "host":
        return _walk(record, figure.host)
    if kind == "device":
        return _walk(record["device_memory"], figure.device)
    return None


def at(record, name, phase):
    """The phased figure `name` of `record` in `phase` ("total": the whole step)."""
    return value(record, name if phase == "total" else f"{name}.{phase}")


def phases(record, name):
    """{phase: value} of a phased figure (`step_peak` ...), the phases the record has."""
    out = {}
    for phase in PHASES:
        found = value(record, name if phase == "total" else f"{name}.{phase}")
        if found is not None:
            out[phase] = found
    return out


def upper_bound(record, name):
    """True when `record`'s figure `name` is an upper bound, not the figure itself: a
    device peak from an allocator that cannot reset its peak, in a phase whose peak the
    record does not show the step set (``peak_exact``)."""
    figure = get(name)
    if not figure.peak or figure.kind != MEMORY or source(record).kind != "device":
        return False
    device = record["device_memory"]
    scope = (device.get("first_step") or {}) if name.startswith("first_step") else device
    if scope.get("peak_since_reset", True):
        return False
    phase = figure.phase or "total"
    return not (scope.get("peak_exact") or {}).get(phase, False)


def upper_bound_reason(record):
    device = record.get("device_memory") or {}
    return device.get("upper_bound_reason") or (
        f"{record.get('framework')}'s allocator cannot reset its peak, so the figure holds everything the "
        "process allocated before the step (compiling, autotuning): an upper bound")


def peak_over_bound(record):
    """Step peak / the workload's bound, or None (no figure, no bound)."""
    peak, bound = value(record, "step_peak"), value(record, "bound")
    return peak / bound if peak is not None and bound else None


def comparable(a, b):
    """Why the memory figures of records `a` and `b` cannot be set side by side, or ""
    (host RSS of one against the device allocator of another measure different things)."""
    sa, sb = source(a), source(b)
    if sa.kind != sb.kind:
        return f"their memory figures come from different sources ({sa.label} against {sb.label})"
    return ""


def measured_for_prediction(record):
    """The measured step peak a framework's prediction compares with: the whole step
    without an optimizer update, else the highest of the non-update phases."""
    found = phases(record, "step_peak")
    if "step" not in found:
        return found.get("total")
    gradient = [v for k, v in found.items() if k not in ("step", "total")]
    return max(gradient) if gradient else None


def mib(value):
    return None if value is None else value / MIB


def nvml_method(record):
    """How NVML answered for a record (or a memory pass's result): per process or for the
    whole device (harness/measure/nvml.py), or None where it was not read."""
    return (record.get("device_memory") or {}).get("nvml_method") if isinstance(record, dict) else None


#: what a host sets to pin OpenBLAS's kernels and their tuning in place of its own choice
FORCED_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def forced_blas(record):
    """"OPENBLAS_CORETYPE=Haswell, ..." where `record`'s row ran on NumPy's bundled
    OpenBLAS (its settings name the library, ``numpy.blas``) with those pinned by the
    environment, else None. Its time is then the pinned kernels' (Haswell's AVX2 on an
    AVX-512 CPU: ~1.4x a conv-heavy step), not what NumPy picks where nothing is set."""
    provenance = (record or {}).get("provenance") or {}
    if "openblas" not in str((provenance.get("settings") or {}).get("numpy.blas", "")):
        return None  # a row that does not run on NumPy's bundled OpenBLAS
    env = provenance.get("env") or {}
    pinned = [f"{name}={env[name]}" for name in FORCED_BLAS_VARIABLES if env.get(name)]
    return ", ".join(pinned) or None
