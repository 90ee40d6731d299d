"""Memory per phase, measured by the harness (CPU: the worker's VmHWM and VmRSS; CUDA:
the framework's allocator, read through the figure registry, harness/figures.py), per
workload, framework, device, mode.

Three figures (harness/measure/memory_meter.py): the *step peak* (above the resident
bytes at the step's start: what the step needs; the headline the gate uses), the
*retained* bytes (the framework's own memory, anonymous and shared-memory pages,
resident at the step's start above the baseline taken before the first step: what it
keeps between steps) and the *footprint* (their sum); the *code pages* (library
pages the steps paged in: shared, reclaimable, not the framework's own); and the
*growth per step* (what a steady step adds to the framework's own memory).
"""

from benchmarks.common import VERSION, Grid, figure

# retained and the footprints count the framework's own pages, without the library code
# pages they held before: their series start again
OWN_PAGES = "own-pages-1"


class PeakMemory(Grid):
    """Steady-state step peak (after a warm-up step), per phase."""

    unit = "bytes"

    def track_forward(self, cache, *cell):
        return figure(cache, cell, "step_peak.forward")

    def track_backward(self, cache, *cell):
        return figure(cache, cell, "step_peak.backward")

    def track_step(self, cache, *cell):
        return figure(cache, cell, "step_peak.step")

    def track_total(self, cache, *cell):
        return figure(cache, cell, "step_peak")


class RetainedMemory(Grid):
    """What the framework keeps between steps (compiled executables, caches, pools,
    optimizer state): its own pages resident at a steady step's start above the first
    baseline."""

    unit = "bytes"
    version = f"{VERSION}+{OWN_PAGES}"

    def track_retained(self, cache, *cell):
        return figure(cache, cell, "retained")


class CodePages(Grid):
    """Library code and data pages the steps paged in, resident at a steady step's start
    above the first baseline: shared with every process mapping the library, dropped
    under memory pressure; advisory (the gate does not fail on it)."""

    unit = "bytes"

    def track_code_pages(self, cache, *cell):
        return figure(cache, cell, "code_pages")


class GrowthPerStep(Grid):
    """The bytes of its own memory the framework adds every steady step, still growing at
    the end of the memory pass's leak phase (the Theil-Sen slope of its second half;
    docs/measurement.md, "Memory that grows"): about 0 for a step that keeps nothing."""

    unit = "bytes"

    def track_leak(self, cache, *cell):
        return figure(cache, cell, "leak")


class FootprintMemory(Grid):
    """Retained + step peak: what the process needs above its inputs."""

    unit = "bytes"
    version = f"{VERSION}+{OWN_PAGES}"

    def track_total(self, cache, *cell):
        return figure(cache, cell, "footprint")


class FirstStepMemory(Grid):
    """The cold first step: allocators and compile caches make it differ from the
    steady state."""

    unit = "bytes"
    version = f"{VERSION}+{OWN_PAGES}"

    def track_total(self, cache, *cell):
        return figure(cache, cell, "first_step_peak")

    def track_footprint(self, cache, *cell):
        return figure(cache, cell, "first_step_footprint")


class SavedActivations(Grid):
    """What the forward pass keeps for the backward, at the end of forward (the
    breakdown's method per framework is in the record; n/a where it cannot be seen)."""

    unit = "bytes"

    def track_saved_activations(self, cache, *cell):
        return figure(cache, cell, "saved_activations")


class LiveMemory(Grid):
    """Memory still held after backward, above the step's start."""

    unit = "bytes"

    def track_after_backward(self, cache, *cell):
        return figure(cache, cell, "live.after_backward")


class DeviceMemory(Grid):
    """CUDA cells: the framework allocator's step peak (n/a on CPU cells)."""

    unit = "bytes"

    def track_allocator_peak(self, cache, *cell):
        return figure(cache, cell, "allocator_step_peak")
