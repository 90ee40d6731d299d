"""CUDA figures of a cell: the framework's allocator probe per phase, NVML beside it.

Everything device-specific of the measurement is here; the adapters supply the probe
(`device_memory_probe(device)`: torch.cuda peak allocated/reserved, JAX
``memory_stats()``, TF ``get_memory_info``, the CuPy pool hook of the reference
engine). The same three figures as on the CPU (harness/measure/memory_meter.py), from
the allocator's bytes:

- ``retained_bytes``: allocated bytes at the step's start minus those at the baseline
  (taken before the first step, like the CPU baseline);
- ``peak_bytes[phase]``: the allocator's peak since the phase began (its peak is reset
  at each phase boundary) minus the allocated bytes at the step's start;
- ``footprint_bytes[phase]`` = retained + peak.

Reserved bytes, where the probe has them, are ``reserved_bytes[phase]``: the
allocator's cache at its highest during the phase, *absolute* (after the first step the
cache already holds what a step needs, so a figure above the step's start reads 0 in
every steady step); NVML's figure of the process beside them.

A probe that cannot reset its peak (JAX's, ``peak_since_reset`` False) reads the
process's peak: a phase's figure is exact only when that peak rose during the phase
(the step set it), and ``peak_exact[phase]`` says which; elsewhere it is an upper bound
(harness/figures.py marks it). `step_alone` measures such a step in a fresh process.
"""

from harness.measure.memory_meter import footprint
from harness.measure.nvml import NvmlSampler
from harness.measure.phases import phase_figures


class DeviceMeter:
    def __init__(self, probe, sampler=None):
        self.probe = probe
        self.sampler = sampler
        self.base = 0
        self.start()

    @classmethod
    def for_adapter(cls, adapter, device):
        probe = adapter.device_memory_probe(device)
        if probe is None:
            return None
        sampler = NvmlSampler()
        sampler.start()
        return cls(probe, sampler)

    def set_baseline(self):
        self.probe.reset()
        self.base = self.probe.current_bytes()

    def start(self):
        self.allocated, self.reserved, self.exact, self.before = {}, {}, {}, {}
        self.step_start = None
        self.window = [None, None]

    def begin_step(self):
        import time

        self.window[0] = time.monotonic()
        self.step_start = self.probe.current_bytes()

    def begin(self, phase):
        self.probe.reset()
        if not self.resettable:  # the process's peak so far: the phase is exact if it rises
            self.before[phase] = self.probe.peak_bytes()

    def end(self, phase):
        import time

        peak = self.probe.peak_bytes()
        self.allocated[phase] = peak - self.step_start
        self.exact[phase] = self.resettable or peak > self.before[phase]
        reserved = _maybe(self.probe, "peak_reserved_bytes")
        if reserved is not None:
            self.reserved[phase] = reserved
        self.window[1] = time.monotonic()

    @property
    def resettable(self):
        return bool(getattr(self.probe, "peak_since_reset", True))

    def _exact(self, peaks):
        """{phase: exact} with total exact when the phase holding the highest peak is."""
        if not peaks:
            return None
        out = dict(self.exact)
        highest = max(self.allocated, key=self.allocated.get)
        out["total"] = self.exact[highest]
        return out

    def figures(self):
        """The record's `device_memory` for the step just measured."""
        sampler = self.sampler
        peaks = phase_figures(self.allocated, max) if self.allocated else None
        retained = self.step_start - self.base if self.step_start is not None else None
        return {
            "retained_bytes": retained,
            "peak_bytes": peaks,
            "footprint_bytes": footprint(retained, peaks) if peaks and retained is not None else None,
            "reserved_bytes": phase_figures(self.reserved, max) if self.reserved else None,
            "nvml_peak_bytes": sampler.peak(*self.window) if sampler and not sampler.unavailable else None,
            "nvml_method": (sampler.method if sampler and not sampler.unavailable else None),
            "nvml_unavailable": sampler.unavailable if sampler else "no sampler",
            "allocator_baseline_bytes": self.base,
            "peak_since_reset": self.resettable,
            "peak_exact": self._exact(peaks),
            "method": getattr(self.probe, "method", None),
        }

    def close(self):
        if self.sampler is not None:
            self.sampler.stop()


def _maybe(probe, name):
    method = getattr(probe, name, None)
    return method() if method is not None else None
