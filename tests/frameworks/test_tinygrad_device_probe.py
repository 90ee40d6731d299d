"""tinygrad's device probe (harness/frameworks/tinygrad.py, MemUsedProbe) on its CPU device.

tinygrad counts the bytes of its buffers per device in one place
(``GlobalCounters.mem_used_per_device``), the CPU device's as the CUDA device's, so
the probe a CUDA cell uses is measured here on the CPU device, through the same
DeviceMeter the worker uses, against figures derived from the math.
"""

import gc

import numpy as np
import pytest

from harness import frameworks, workloads
from harness.measure.cuda import DeviceMeter
from harness.measure.phases import Step


@pytest.fixture(scope="module")
def tinygrad():
    adapter = frameworks.get("tinygrad")
    ok, reason = adapter.available()
    if not ok:
        pytest.skip(f"tinygrad unavailable: {reason}")
    adapter.load("cpu", "eager")
    adapter.buffer_cache_off()  # as the memory pass runs: a freed buffer is freed
    return adapter


@pytest.fixture()
def probe(tinygrad):
    from tinygrad import Device

    from harness.frameworks.tinygrad import MemUsedProbe

    return MemUsedProbe(Device.DEFAULT)


class PhaseMeter:
    """What Step asks of a meter, forwarded to a DeviceMeter (as MemoryMeter does)."""

    def __init__(self, device):
        self.device = device

    def begin_step(self):
        self.device.start()
        self.device.begin_step()

    def begin(self, phase):
        self.device.begin(phase)

    def end(self, phase, live=None):
        self.device.end(phase)

    def end_step(self):
        pass


def realize_ones(n):
    from tinygrad import Tensor

    return Tensor(np.ones(n, np.float32)).realize()


def test_the_probe_counts_a_buffer_exactly_and_keeps_its_peak_after_the_free(probe):
    del_later = realize_ones(10)  # tinygrad's first use of a device allocates a few bytes for itself
    del del_later
    gc.collect()
    probe.reset()
    start = probe.current_bytes()
    buffer = realize_ones(1000)
    assert probe.current_bytes() - start == 4000  # 1000 float32: a buffer holds its bytes, no more
    del buffer
    gc.collect()
    assert probe.current_bytes() == start  # freed, not cached (the cache is off)
    assert probe.peak_bytes() - start == 4000  # the peak is kept until reset
    probe.reset()
    assert probe.peak_bytes() == probe.current_bytes() == start


def test_a_chained_dot_step_peaks_at_its_saved_products_and_leaves_nothing(tinygrad, probe):
    problem = workloads.build("chained_dot", "tiny", "float32", 0)
    array = problem.inputs["z"].nbytes  # one D x cols product (32 x 32 float32 at tiny: 4 KiB)
    params = tinygrad.from_numpy(problem.params)
    inputs = tinygrad.from_numpy(problem.inputs)
    step = Step(tinygrad, problem.loss, params, inputs, "eager")
    meter = DeviceMeter(probe)
    meter.set_baseline()
    step.run(PhaseMeter(meter))  # the first step compiles; the second is measured
    gc.collect()
    step.run(PhaseMeter(meter))
    figures = meter.figures()
    bound = workloads.bound_bytes("chained_dot", "tiny", "float32")  # L - 1 saved products
    peak = figures["peak_bytes"]["total"]
    # No schedule that stores the products (tinygrad does not recompute a matmul) holds
    # fewer than the L - 1 the backward pass needs; on top of them at most z_L (live as it
    # is made), x's gradient being summed, and the loss with a reduction's partial sums
    # (a few hundred floats): two arrays and 2 KiB.
    assert bound <= peak <= bound + 2 * array + 2048
    assert figures["peak_since_reset"] is True
    # Between steps nothing is left: the first step's gradient and loss were freed before
    # the second began, so its start is the baseline (params and inputs) exactly.
    assert figures["retained_bytes"] == 0


def test_a_cuda_cell_gets_the_probe_of_tinygrads_default_device_and_a_cpu_cell_none(tinygrad):
    from tinygrad import Device

    assert tinygrad.device_memory_probe("cpu") is None  # the RSS figures are a CPU cell's
    # A CUDA cell's worker loads tinygrad with Device.DEFAULT = "CUDA"; here it is "CPU",
    # which stands in for it: the meter the worker makes, with the record's fields.
    meter = DeviceMeter.for_adapter(tinygrad, "cuda")
    try:
        assert meter.probe.device == Device.DEFAULT
        meter.set_baseline()
        meter.begin_step()
        meter.begin("gradient")
        buffer = realize_ones(256)
        meter.end("gradient")
        figures = meter.figures()
        del buffer
    finally:
        meter.close()
    assert figures["peak_bytes"]["total"] == 1024  # 256 float32
    assert figures["footprint_bytes"]["total"] == figures["retained_bytes"] + 1024
    assert figures["nvml_unavailable"]  # no GPU here: NVML says why, the allocator figures stand
