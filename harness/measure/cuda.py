"""CUDA figures of a cell: the framework's allocator probe per phase, NVML beside it.

Everything device-specific of the measurement is here; the adapters supply the probe
(`device_memory_probe(device)`: torch.cuda peak allocated/reserved, JAX
``memory_stats()``, TF ``get_memory_info``, the CuPy pool hook of the reference
engine). The probe's peak is reset at each phase boundary; a phase's figure is the
probe's peak minus the allocator's bytes at the baseline (taken before the warm-up,
like the CPU baseline). A probe that cannot reset its peak (JAX: ``peak_since_reset``
is False) gives upper bounds, and the record says so.

Not run here: this machine has no GPU. Without one, cuda cells are "unavailable"
before any of this runs.
"""

from harness.measure.nvml import NvmlSampler
from harness.measure.phases import phase_figures


class DeviceMeter:
    def __init__(self, probe, sampler=None):
        self.probe = probe
        self.sampler = sampler
        self.base = self.base_reserved = 0
        self.allocated, self.reserved = {}, {}
        self.window = [None, None]

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
        self.base_reserved = _maybe(self.probe, "reserved_bytes") or 0

    def start(self):
        self.allocated, self.reserved = {}, {}
        self.window = [None, None]

    def begin(self, phase):
        import time

        if self.window[0] is None:
            self.window[0] = time.monotonic()
        self.probe.reset()

    def end(self, phase):
        import time

        self.allocated[phase] = self.probe.peak_bytes() - self.base
        reserved = _maybe(self.probe, "peak_reserved_bytes")
        if reserved is not None:
            self.reserved[phase] = reserved - self.base_reserved
        self.window[1] = time.monotonic()

    def figures(self):
        """The record's `device_memory` for the step just measured."""
        sampler = self.sampler
        return {
            "allocator_peak_bytes": phase_figures(self.allocated, max) if self.allocated else None,
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
