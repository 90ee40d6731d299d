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

Reserved (pool) bytes are given the same way where the probe has them
(``reserved_peak_bytes``, above the reserved bytes at the step's start), NVML's
process figure beside them. A probe that cannot reset its peak (JAX:
``peak_since_reset`` is False) gives upper bounds, and the record says so.

Not run on a GPU as of 2026-11-25 (the development machine has none: docs/gpu.md lists
what the first GPU run checks). Without one, cuda cells are "unavailable" before any
of this runs.
"""

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
        self.allocated, self.reserved = {}, {}
        self.step_start = self.step_start_reserved = None
        self.window = [None, None]

    def begin_step(self):
        import time

        self.window[0] = time.monotonic()
        self.step_start = self.probe.current_bytes()
        self.step_start_reserved = _maybe(self.probe, "reserved_bytes")

    def begin(self, phase):
        self.probe.reset()

    def end(self, phase):
        import time

        self.allocated[phase] = self.probe.peak_bytes() - self.step_start
        reserved = _maybe(self.probe, "peak_reserved_bytes")
        if reserved is not None and self.step_start_reserved is not None:
            self.reserved[phase] = reserved - self.step_start_reserved
        self.window[1] = time.monotonic()

    def figures(self):
        """The record's `device_memory` for the step just measured."""
        sampler = self.sampler
        peaks = phase_figures(self.allocated, max) if self.allocated else None
        retained = self.step_start - self.base if self.step_start is not None else None
        return {
            "retained_bytes": retained,
            "peak_bytes": peaks,
            "footprint_bytes": {k: retained + v for k, v in peaks.items()} if peaks and retained is not None else None,
            "reserved_peak_bytes": phase_figures(self.reserved, max) if self.reserved else None,
            "nvml_peak_bytes": sampler.peak(*self.window) if sampler and not sampler.unavailable else None,
            "nvml_method": (sampler.method if sampler and not sampler.unavailable else None),
            "nvml_unavailable": sampler.unavailable if sampler else "no sampler",
            "allocator_baseline_bytes": self.base,
            "peak_since_reset": bool(getattr(self.probe, "peak_since_reset", True)),
        }

    def close(self):
        if self.sampler is not None:
            self.sampler.stop()


def _maybe(probe, name):
    method = getattr(probe, name, None)
    return method() if method is not None else None
