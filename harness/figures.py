"""What a cell's figures are, and how each is read from a record: the one place.

Every reader (the page, the run's table, `diff`, the release detector, `bisect`,
`scale`, the asv benchmarks, the prediction's ratio, the breakdown, the pytest marker)
takes a figure's value, name, label, meaning, unit and direction from here and never
from the record's keys, so a figure means the same in every row, mode and device. A
reader that lists figures (the detector, `bisect --metric`, `diff`, the page's
figure lines) lists the registry's figures that name it in `readers`: a new figure
shown everywhere is one `Figure` line here, plus its column where a table has columns.

A record's memory figures come from one **source**, chosen by its device:

- ``host``: a CPU cell. The step peaks are the process's resident memory (clear_refs +
  VmHWM) above the step's start (harness/measure/memory_meter.py). What the framework
  **keeps** (retained, and the footprints built on it) is its own memory: the
  anonymous and shared-memory pages of the resident set (``retained_detail_bytes``:
  heap, pools, caches, compiled code the framework generated). The file-backed pages
  the steps paged in (library code and read-only data, shared with every process that
  maps the library and dropped under memory pressure instead of causing an OOM) are
  a figure of their own, **code pages**; the process's whole RSS stays available as
  the host figures (``host_retained``, ``host_footprint``).
- ``device``: a CUDA cell whose adapter reads the framework's allocator
  (``device_memory``, harness/measure/cuda.py). The host's RSS of such a cell is a
  figure of its own (``host_step_peak``, ``host_retained``), never its headline.
- none: a CUDA cell whose adapter gives no device figure. Its memory figures are absent
  (`source(record).reason` says why), never its host figures in their place.

A record written before the resident set was split by page kind has no
``retained_detail_bytes``: its own-memory figures are absent (never its whole RSS in
their place, so no reader mixes the two), and `shown` gives the whole-RSS figure with
the mark ``whole RSS`` where a reader shows one.

A device peak from an allocator that cannot reset its peak (JAX: jax#8096) is an
**upper bound** unless the record shows that the process's peak rose during that very
phase (then the step set it, and the figure is exact: `upper_bound`). Readers mark an
upper bound as one and never colour it best.

A NumPy row's **time** on a host that pins OpenBLAS's kernels (`forced_blas`: some
hosts set OPENBLAS_CORETYPE because older OpenBLAS builds miscompute on their CPU) is
the time of those kernels, not of NumPy as installed; readers mark it as such.
"""

from dataclasses import dataclass

from harness.units import MIB

PHASES = ("forward", "backward", "step", "total")

#: a figure's kind: which source it follows
MEMORY = "memory"  # the cell's memory source: host RSS on CPU, the allocator on CUDA
HOST = "host"  # the process's resident memory, on every device
DEVICE = "device"  # the device allocator or NVML alone (absent on CPU)
CELL = "cell"  # not memory: time, gradient error, the bound (the same on every device)

#: the readers that list figures (a figure names those that list it in `readers`)
DETECT = "detect"  # the release detector: a series per figure, its changes confirmed
BISECT = "bisect"  # `harness bisect --metric`
DIFF = "diff"  # `harness diff`'s figure rows
PAGE = "page"  # a line of its own in a cell of the comparison page (beside the lines drawn for the headline)

#: the kinds of resident page that are the process's own memory (/proc/self/status:
#: RssAnon, RssShmem); file-backed pages (RssFile) are code pages
OWN_PAGES = ("anon", "shmem")
CODE_PAGES = "file"
WHOLE_RSS = "whole RSS"  # the mark of a whole-RSS figure shown for an own-memory one (`shown`)
UPPER_BOUND = "upper bound"  # the mark of an allocator peak that cannot be reset (`shown`)


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str  # "bytes" | "seconds" | "ratio"
    kind: str  # MEMORY | HOST | DEVICE | CELL
    host: object = ()  # how it is read from the record: a path of keys, or a function of the record
    device: tuple = ()  # path into record["device_memory"] (MEMORY, DEVICE)
    meaning: str = ""
    better: str = "lower"  # which way is better ("lower" | "higher")
    peak: bool = False  # a peak (or a sum with one): an upper bound where the allocator cannot reset
    readers: frozenset = frozenset()  # the readers that list it (DETECT, BISECT, DIFF, PAGE)
    advisory: str = ""  # why a change of it is never an actionable memory change ("": it can be one)
    code_part: str = ""  # the code-pages figure inside this one (a move mostly of it is not the framework's)
    code_estimate: str = ""  # where a record lacks code_part (written before it was kept): the figure that estimates it
    whole_rss: str = ""  # the whole-RSS figure `shown` gives, marked, where a record has no page split
    aliases: tuple = ()  # older names still accepted where a figure is named (`bisect --metric total`)
    grain: int = 0  # bytes below which a move of it is the instrument's grain, not a change (0: the detector's)
    act_bytes: int = 0  # bytes a confirmed move must reach to be acted on (0: the confirmation's rule)

    @property
    def phase(self):
        name = self.name.rpartition(".")[2]
        return name if "." in self.name and name in PHASES else None

    @property
    def base(self):
        """The name of the whole-step figure a phase's figure belongs to (`step_peak` of
        `step_peak.forward`); the figure's own name otherwise."""
        return self.name.rpartition(".")[0] if self.phase else self.name

    def listed_in(self, reader):
        return reader in self.readers


def _path(*keys):
    return tuple(keys)


def _own(detail_key):
    """The record's own pages (anon + shmem) from its split of the resident set, or None
    where the record has no split (written before it was kept)."""
    def read(record):
        detail = record.get(detail_key)
        if not isinstance(detail, dict) or not detail:
            return None
        return sum(detail.get(kind) or 0 for kind in OWN_PAGES)
    return read


def _own_plus(detail_key, peak_key, phase):
    """Own pages kept + the step peak of `phase`: a footprint of the framework's own memory."""
    own = _own(detail_key)

    def read(record):
        kept, peak = own(record), _walk(record, (peak_key, phase))
        return None if kept is None or peak is None else kept + peak
    return read


def _phased(name, label, host, device_path, meaning, kind=MEMORY, **extra):
    """The figure over the whole step (`name`) and one per phase (`name.forward` ...);
    `host(phase)` says how each is read on the host (None: not a host figure)."""
    return [Figure(name if phase == "total" else f"{name}.{phase}",
                   label if phase == "total" else f"{label} ({phase})", "bytes", kind,
                   host(phase) if host else (),
                   tuple(device_path) + (phase,) if device_path is not None else (), meaning, peak=True,
                   **{k: (v(phase) if callable(v) else v) for k, v in extra.items()})
            for phase in ("total",) + PHASES[:-1]]


def _at(key):
    return lambda phase: (key, phase)


def _dotted(name):
    return lambda phase: name if phase == "total" else f"{name}.{phase}"


_LISTED = frozenset((DETECT, BISECT, DIFF))
_STEP_PEAK = ("what one steady step needs: its peak above the bytes resident at its start (on the host: the "
              "resident set, under a fixed mmap threshold with the heap trimmed before the step; any library "
              "pages the step paged in are its step code pages)")
_KEEPS = ("what the framework keeps between steps, its own memory: on the host the anonymous and shared-memory "
          "pages resident at a steady step's start above the baseline (heap, pools, caches, compiled programs), "
          "without the library code pages")
_FOOTPRINT = "retained + step peak: what the process needs above its inputs, of its own memory"
_FIRST = "the cold first step (tracing, compiling, first kernels, caches filled)"
_CODE = ("file-backed pages (library code and read-only data) resident at a steady step's start above the "
         "baseline: paged in by the steps' first kernels, shared with every process mapping the library and "
         "dropped under memory pressure, not the framework's own memory")
_CODE_ADVISORY = "code pages: library pages paged in, shared and reclaimable, not memory the framework keeps"
# The library pages a first step paged in stay resident (clean file pages are not given
# back without memory pressure) and the warm-up runs the same kernels: the code pages at
# a steady step's start are those the first step paged in, and a few more (docs/measurement.md
# measures the two side by side). A record written before the first step's own were kept
# has only these.
_FIRST_CODE_ESTIMATE = lambda phase: "code_pages" if phase == "total" else ""  # noqa: E731
_TABLE = [
    *_phased("step_peak", "step peak", _at("peak_bytes"), ("peak_bytes",), _STEP_PEAK,
             readers=lambda phase: frozenset({BISECT, DIFF}) if phase == "step" else _LISTED,
             code_part=_dotted("step_code_pages"),
             aliases=lambda phase: (phase,) if phase != "total" else ("total",)),
    *_phased("footprint", "footprint", lambda phase: _own_plus("retained_detail_bytes", "peak_bytes", phase),
             ("footprint_bytes",), _FOOTPRINT, code_part=_dotted("step_code_pages"),
             whole_rss=_dotted("host_rss_footprint"),
             readers=lambda phase: _LISTED if phase == "total" else frozenset({DIFF})),
    Figure("retained", "retained", "bytes", MEMORY, _own("retained_detail_bytes"), ("retained_bytes",), _KEEPS,
           readers=_LISTED, whole_rss="host_rss_retained"),
    Figure("code_pages", "code pages", "bytes", HOST, _path("retained_detail_bytes", CODE_PAGES), (), _CODE,
           readers=_LISTED | {PAGE}, advisory=_CODE_ADVISORY),
    *_phased("step_code_pages", "step code pages", _at("peak_file_bytes"), None,
             "file-backed pages a steady step paged in (its end above its start): at most this much of the step "
             "peak is library pages (clean file pages are not given back inside a step)", kind=HOST,
             readers=lambda phase: frozenset({DIFF}) if phase == "total" else frozenset(), advisory=_CODE_ADVISORY),
    *_phased("first_step_peak", "first-step peak", _at("first_step_peak_bytes"), ("first_step", "peak_bytes"),
             f"step peak of {_FIRST}", code_part=_dotted("first_step_code_pages"), code_estimate=_FIRST_CODE_ESTIMATE,
             readers=lambda phase: _LISTED if phase == "total" else frozenset({DIFF}),
             aliases=lambda phase: ("first_step",) if phase == "total" else ()),
    *_phased("first_step_footprint", "first-step footprint",
             lambda phase: _own_plus("first_step_retained_detail_bytes", "first_step_peak_bytes", phase),
             ("first_step", "footprint_bytes"), f"retained + peak of {_FIRST}",
             code_part=_dotted("first_step_code_pages"), code_estimate=_FIRST_CODE_ESTIMATE,
             whole_rss=_dotted("host_rss_first_step_footprint"),
             readers=lambda phase: _LISTED if phase == "total" else frozenset(),
             aliases=lambda phase: ("first_footprint",) if phase == "total" else ()),
    Figure("first_step_retained", "first-step retained", "bytes", MEMORY, _own("first_step_retained_detail_bytes"),
           ("first_step", "retained_bytes"), f"own memory kept at the start of {_FIRST} above the baseline",
           readers=frozenset({DIFF}), whole_rss="host_rss_first_step_retained"),
    *_phased("first_step_code_pages", "first-step code pages", _at("first_step_peak_file_bytes"), None,
             f"file-backed pages {_FIRST} paged in (its end above its start): library code its first kernels ran; "
             "at most this much of the first-step peak is library pages", kind=HOST,
             readers=lambda phase: frozenset({DETECT, DIFF}) if phase == "total" else frozenset(),
             advisory=_CODE_ADVISORY),
    # the process's resident memory whatever the device: on a CUDA cell, what the host needed
    *_phased("host_step_peak", "host RSS step peak", _at("peak_bytes"), None,
             "the process's resident memory: the step's peak above its start", kind=HOST),
    Figure("host_retained", "host retained", "bytes", HOST, _own("retained_detail_bytes"), (),
           "the process's own pages (anon + shmem) at a steady step's start above the baseline, whatever the device"),
    Figure("host_rss_retained", "host RSS retained", "bytes", HOST, _path("retained_bytes"), (),
           "the process's whole resident set at a steady step's start above the baseline: own pages and code pages",
           readers=frozenset({DIFF})),
    *_phased("host_rss_footprint", "host RSS footprint", _at("footprint_bytes"), None,
             "the whole resident set kept + the step peak", kind=HOST),
    Figure("host_rss_first_step_retained", "host RSS first-step retained", "bytes", HOST,
           _path("first_step_retained_bytes"), (), "the whole resident set at the first step's start above the baseline"),
    *_phased("host_rss_first_step_footprint", "host RSS first-step footprint", _at("first_step_footprint_bytes"),
             None, "the whole resident set kept + the first step's peak", kind=HOST),
    *_phased("tracemalloc_peak", "tracemalloc peak", _at("tracemalloc_peak_bytes"), None,
             "Python's tracemalloc peak of one more step (NumPy-based engines)", kind=HOST),
    Figure("live.after_forward", "live after forward", "bytes", MEMORY, ("live_bytes", "after_forward"), (),
           "resident above the step's start when the forward ends (host RSS; none on a device)",
           readers=frozenset({DIFF})),
    Figure("live.after_backward", "live after backward", "bytes", MEMORY, ("live_bytes", "after_backward"), (),
           "resident above the step's start when the backward ends (host RSS; none on a device)",
           readers=frozenset({DIFF})),
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
    Figure("time", "time", "seconds", CELL, ("time_s", "total"), (),
           "median time of one steady step (measured on a shared machine: advisory)", readers=_LISTED,
           advisory="time: measured on a shared machine"),
    *[Figure(f"time.{phase}", f"time ({label})", "seconds", CELL, ("time_s", phase), (),
             f"median time of one steady step's {label}", readers=frozenset({DIFF}),
             advisory="time: measured on a shared machine")
      for phase, label in (("forward", "forward"), ("backward", "backward"), ("step", "update"))],
    Figure("first_step_time", "first-step time", "seconds", CELL, ("compile_s",), (),
           "the cold first step's time (tracing, compiling)", readers=frozenset({DIFF}),
           advisory="time: measured on a shared machine"),
    Figure("leak", "growth per step", "bytes", CELL, ("leak", "bytes_per_step"), (),
           "what the framework's own memory gains per step at the end of a run of steady steps (Theil-Sen slope; "
           "the host's own pages, a CUDA cell's allocator): growth that does not stop is a leak "
           "(harness/measure/leak.py); its verdict is `leak_verdict`", readers=_LISTED | {PAGE},
           grain=4096, act_bytes=16 * 1024),
    Figure("predicted", "predicted", "bytes", CELL, ("prediction", "bytes"), (),
           "the framework's own prediction of the step (its compiler's plan, never a measurement); moved with the "
           "step peak: the plan changed; step peak moved alone: the runtime changed", readers=frozenset({DETECT})),
    Figure("grad_rel_err", "gradient error", "ratio", CELL, ("grad_rel_err",), (),
           "relative error of the gradient against the float64 reference engine"),
]
FIGURES = {figure.name: figure for figure in _TABLE}


#: every older name of a figure (`bisect --metric total`, a finding recorded with one) -> its name
ALIASES = {alias: figure.name for figure in _TABLE for alias in figure.aliases}


class UnknownFigure(KeyError):
    def __str__(self):
        return f"unknown figure {self.args[0]!r}; valid figures: {', '.join(FIGURES)}"


def get(name):
    try:
        return FIGURES[ALIASES.get(name, name)]
    except KeyError:
        raise UnknownFigure(name) from None


def resolve(name):
    """The figure's name for `name` or one of its older names (None: neither)."""
    name = ALIASES.get(name, name)
    return name if name in FIGURES else None


def listed(reader):
    """The figures `reader` lists (DETECT, BISECT, DIFF, PAGE), in the registry's order."""
    return [figure for figure in _TABLE if figure.listed_in(reader)]


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


def _read(record, how):
    """A figure read from the record by its path, or by its function (a derived figure)."""
    found = how(record) if callable(how) else _walk(record, how)
    return None if isinstance(found, bool) or not isinstance(found, (int, float)) else found


def value(record, name):
    """The figure `name` of `record` (a number), or None: not ok, not measured, not
    this source's (a device figure of a CPU cell), or no source (see `source`)."""
    figure = get(name)
    if not record or record.get("status", "ok") != "ok":
        return None
    if figure.kind in (HOST, CELL):
        return _read(record, figure.host)
    kind = source(record).kind
    if figure.kind == DEVICE:
        return _walk(record.get("device_memory"), figure.device) if kind == "device" else None
    if kind == "host":
        return _read(record, figure.host)
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


def code_part(record, name):
    """(bytes, estimated) of the library code pages inside figure `name` of `record`
    (a step peak's pages paged in): its `code_part` where the record has it, else its
    `code_estimate` with estimated True; (None, False) where neither is known."""
    figure = get(name)
    for other, estimated in ((figure.code_part, False), (figure.code_estimate, True)):
        found = value(record, other) if other else None
        if found is not None:
            return found, estimated
    return None, False


def leak_verdict(record):
    """The leak phase's verdict of an ok record (flat, settles, grows, inconclusive), or
    None where it did not run."""
    if not record or record.get("status", "ok") != "ok":
        return None
    return (record.get("leak") or {}).get("verdict")


def shown(record, name):
    """(value, marks) of the figure `name` as a reader shows it: marks holds UPPER_BOUND
    for an allocator peak that cannot be reset, and WHOLE_RSS where the record has no
    split of its resident set by page kind (written before it was kept) and the
    process's whole RSS stands in for its own memory, marked. Never used to compare or
    detect: those read `value`, which has no such stand-in."""
    figure = get(name)
    found = value(record, figure.name)
    if found is not None:
        return found, ((UPPER_BOUND,) if upper_bound(record, figure.name) else ())
    if figure.whole_rss and source(record).kind == "host":
        whole = value(record, figure.whole_rss)
        if whole is not None:
            return whole, (WHOLE_RSS,)
    return None, ()


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
