"""The memory meter: what one step keeps, needs and costs, per phase.

Three figures per step, all from the same two readings so that they add up exactly:

- ``retained_bytes``: resident bytes at the step's start above the baseline taken
  before the first step: what the framework keeps between steps (compiled per-op
  executables, allocator pools, caches, optimizer state). One number per step, split
  in ``retained_detail_bytes`` by the kind of page (``anon``: heap, pools, caches,
  executables; ``file``: library code and data faulted in on first use; ``shmem``),
  from the same reading, so the three add up to it.
- ``peak_bytes[phase]``: the phase's high-water mark above the resident bytes *at the
  step's start*: what the step needs (the headline figure; peak / bound, "mem x ref",
  the colours, the gate and asv's PeakMemory use it). ``peak_file_bytes[phase]``: the
  file-backed pages resident at the phase's end above the step's start, i.e. library
  pages the step paged in. Clean file pages are not given back inside a step (nothing
  reclaims them without memory pressure), so the file pages at the moment of the peak
  lie between the step's start and the phase's end: at most this much of the peak is
  library pages, the rest is the step's own memory. A steady step pages in next to
  nothing; a cold first step (first kernels, compiling) pages in most of it.
- ``footprint_bytes[phase]`` = retained + step peak: what the process needs above its
  inputs (the single figure of schema 1, measured against the first baseline).

``live_bytes`` (after forward, after backward) are resident bytes above the step's
start too. On CUDA the device meter gives the same three from the framework's
allocator (harness/measure/cuda.py).
"""

from harness.measure.phases import phase_figures


class MemoryMeter:
    """Per-phase figures of one step from the RSS probe (and the device meter on CUDA,
    the tracemalloc probe in the traced step); marks for the timeline."""

    def __init__(self, rss, marks, device=None, tracemalloc=None):
        self.rss, self.marks, self.device, self.tracemalloc = rss, marks, device, tracemalloc
        self.label = ""
        self._clear()

    def _clear(self):
        self.peaks, self.paged_in, self.live, self.traced = {}, {}, {}, {}
        self.step_start = self.retained = None
        self.retained_kinds, self.start_kinds = {}, {}

    def start(self, label):
        """Start a fresh record of one step's figures (labels the timeline marks)."""
        self.label = label
        self._clear()
        if self.device is not None:
            self.device.start()

    def begin_step(self):
        # One reading of the resident bytes at the step's start: the step peaks are
        # measured from it, and retained is it minus the baseline, so footprint =
        # retained + peak holds exactly.
        self.step_start, kinds = self.rss.current_with_kinds()
        self.start_kinds = kinds
        self.retained = self.step_start - self.rss.baseline
        base = self.rss.baseline_kinds
        self.retained_kinds = {kind: value - base.get(kind, 0) for kind, value in kinds.items()}
        if self.device is not None:
            self.device.begin_step()

    def begin(self, phase):
        self.marks.mark(f"{self.label}{phase}")
        self.rss.reset()
        if self.device is not None:
            self.device.begin(phase)
        if self.tracemalloc is not None:
            self.tracemalloc.reset()

    def end(self, phase, live=None):
        hwm, file_pages = self.rss.hwm_and_file()
        self.peaks[phase] = hwm - self.step_start
        # pages dropped by memory pressure would make this negative: none were paged in
        self.paged_in[phase] = max(0, file_pages - self.start_kinds.get("file", 0))
        if self.tracemalloc is not None:
            self.traced[phase] = self.tracemalloc.peak()
        if self.device is not None:
            self.device.end(phase)
        if live:
            self.live[live] = self.rss.current() - self.step_start

    def end_step(self):
        self.marks.mark(f"{self.label}end")

    def figures(self):
        """The step just measured, one field per results.STEP_FIELDS (phase dicts: the
        phases measured, and total = their maximum)."""
        peaks = phase_figures(self.peaks, max)
        return {
            "retained_bytes": self.retained,
            "retained_detail_bytes": dict(self.retained_kinds),
            "peak_bytes": peaks,
            "peak_file_bytes": phase_figures(self.paged_in, max),
            "footprint_bytes": footprint(self.retained, peaks),
            "live_bytes": dict(self.live),
        }

    def traced_figures(self):
        return phase_figures(self.traced, max) if self.traced else None


def footprint(retained, peaks):
    """{phase: retained + step peak}: the footprint of each phase."""
    return {phase: retained + value for phase, value in peaks.items()}


def median_step(samples):
    """The sample whose total step peak is the median of `samples` (figure dicts from
    `MemoryMeter.figures`, or the device meter's: each chosen by its own figures). A whole step, not per-key medians: its retained, peaks and
    footprint come from the same step, so footprint = retained + peak still holds."""
    ordered = sorted(samples, key=lambda s: s["peak_bytes"]["total"])
    return ordered[(len(ordered) - 1) // 2]
