"""Peak memory per phase, measured by the harness (CPU: the worker's VmHWM above its
baseline; CUDA: the framework's allocator), per workload, framework, device, mode."""

from benchmarks.common import Grid, figure


class PeakMemory(Grid):
    """Steady-state peak (after a warm-up step), per phase."""

    unit = "bytes"

    def track_forward(self, cache, *cell):
        return figure(cache, cell, "peak_bytes", "forward")

    def track_backward(self, cache, *cell):
        return figure(cache, cell, "peak_bytes", "backward")

    def track_step(self, cache, *cell):
        return figure(cache, cell, "peak_bytes", "step")

    def track_total(self, cache, *cell):
        return figure(cache, cell, "peak_bytes", "total")


class FirstStepMemory(Grid):
    """Peak of the cold first step: allocators make it differ from the steady state."""

    unit = "bytes"

    def track_total(self, cache, *cell):
        return figure(cache, cell, "first_step_peak_bytes", "total")


class LiveMemory(Grid):
    """Memory still held after backward: what a framework keeps between steps."""

    unit = "bytes"

    def track_after_backward(self, cache, *cell):
        return figure(cache, cell, "live_bytes", "after_backward")


class DeviceMemory(Grid):
    """CUDA cells: the framework allocator's peak (n/a on CPU cells)."""

    unit = "bytes"

    def track_allocator_peak(self, cache, *cell):
        return figure(cache, cell, "device_memory", "allocator_peak_bytes", "total")
