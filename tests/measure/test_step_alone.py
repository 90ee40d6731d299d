"""An allocator that cannot reset its peak (JAX's on CUDA) on the CPU: a fake probe over
tracemalloc, whose peak is never reset, stands in for it around the reference engine.

chained_dot tiny at COLS columns keeps L-1 = 4 arrays of D x COLS float32 (2 MiB each)
for x's gradient: 8 MiB of bound, far above everything else the step allocates twice."""

import json
import subprocess
import sys
import tracemalloc

import pytest

from harness import figures
from harness.measure import cuda, worker
from harness.measure.marks import Marks
from harness.units import MIB

COLS = 16384


class PeakSinceStartProbe:
    """tracemalloc's bytes; its peak counts from when tracing started, like JAX's
    `peak_bytes_in_use` counts from the process's start."""

    peak_since_reset = False
    method = "tracemalloc, peak never reset (a stand-in for JAX's allocator)"

    def reset(self):
        pass

    def current_bytes(self):
        return tracemalloc.get_traced_memory()[0]

    def peak_bytes(self):
        return tracemalloc.get_traced_memory()[1]


@pytest.fixture
def fake_device(monkeypatch):
    monkeypatch.setattr(cuda.DeviceMeter, "for_adapter", classmethod(lambda cls, a, d: cls(PeakSinceStartProbe())))

    def fresh_process(argv, **kwargs):  # the step-alone child, in this process with a fresh peak
        job_path, _ = argv[-2:]
        with open(job_path) as handle:  # no death-with-parent watch: the "parent" is this process
            child = dict(json.load(handle), parent_pid=None)
        with open(job_path, "w") as handle:
            json.dump(child, handle)
        tracemalloc.stop()
        tracemalloc.start()
        worker.main(argv[-2:])
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", fresh_process)
    tracemalloc.start()
    yield
    tracemalloc.stop()


def job(**extra):
    cell = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
            "mode": "eager", "device": "cpu", "batch": COLS}
    return {"kind": "memory", "cell": cell, "seed": 0, "warmup": 1, "predict": False, **extra}


def record(result):
    return {"status": "ok", "device": "cuda", **result}


class ScriptedProbe:
    """An allocator without a peak reset whose bytes the test sets by hand."""

    peak_since_reset = False

    def __init__(self):
        self.current = self.peak = 0

    def reset(self):
        pass

    def allocate(self, size):
        self.current += size
        self.peak = max(self.peak, self.current)

    def current_bytes(self):
        return self.current

    def peak_bytes(self):
        return self.peak


def test_a_phase_is_exact_only_when_it_raised_the_process_peak():
    probe = ScriptedProbe()
    meter = cuda.DeviceMeter(probe)
    probe.allocate(100 * MIB)  # compiling and autotuning scratch, freed
    probe.allocate(-100 * MIB)
    meter.set_baseline()
    for phase, size in (("forward", 10 * MIB), ("backward", 150 * MIB)):
        meter.begin_step() if phase == "forward" else None
        meter.begin(phase)
        probe.allocate(size)
        probe.allocate(-size)
        meter.end(phase)
    found = meter.figures()
    # forward's 10 MiB lay under the 100 MiB high-water mark: at most 100 MiB, not exact;
    # backward's 150 MiB raised it: exact, and the step's total with it
    assert found["peak_exact"] == {"forward": False, "backward": True, "total": True}
    assert found["peak_bytes"]["forward"] == 100 * MIB and found["peak_bytes"]["total"] == 150 * MIB
    as_record = {"status": "ok", "device": "cuda", "device_memory": found}
    assert figures.upper_bound(as_record, "step_peak.forward") and not figures.upper_bound(as_record, "step_peak")


def test_the_step_measured_alone_is_exact_and_keeps_the_in_process_bound_beside_it(fake_device):
    result = worker.memory_pass(job(), Marks(None))
    device = result["device_memory"]
    assert device["step_alone"]["status"] == "ok", device["step_alone"]
    assert device["peak_exact"]["total"] and not figures.upper_bound(record(result), "step_peak")
    # the same step in both processes: the figures agree within Python's own small objects
    assert device["in_process"]["peak_bytes"]["total"] == pytest.approx(device["peak_bytes"]["total"], rel=0.01)
    peak = figures.value(record(result), "step_peak")
    # the 4 saved (D, COLS) float32 arrays at least, and well under what a second copy of them would add
    assert 8 * MIB <= peak < 16 * MIB, peak / MIB
    assert device["footprint_bytes"]["total"] == device["retained_bytes"] + peak


def test_a_failed_step_alone_leaves_the_upper_bound_and_says_why(fake_device, monkeypatch):
    def dies(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, 1)

    monkeypatch.setattr(subprocess, "run", dies)
    result = worker.memory_pass(job(), Marks(None))
    device = result["device_memory"]
    assert device["step_alone"]["status"] == "error" and "TimeoutExpired" in device["step_alone"]["message"]
    # the in-process figures stay, exact or an upper bound as their own phases showed
    assert "in_process" not in device and "peak_exact" in device
    assert figures.upper_bound(record(result), "step_peak") == (not device["peak_exact"]["total"])


def test_a_compiled_steps_own_buffers_count_in_the_device_step_peak_on_cuda():
    # TinyJit keeps its buffers between calls: on CUDA they are device memory, resident at
    # the step's start (the allocator files them under retained); they move into the
    # device's step peak, footprint unchanged, as the host's do on the CPU
    device = {"retained_bytes": 40 * MIB, "peak_bytes": {"total": 8 * MIB},
              "footprint_bytes": {"total": 48 * MIB}, "nvml_peak_bytes": 600 * MIB}
    moved = worker._count_held_in_step(device, 32 * MIB, "anon")
    assert moved["retained_bytes"] == 8 * MIB and moved["peak_bytes"]["total"] == 40 * MIB
    assert moved["footprint_bytes"] == device["footprint_bytes"]


def test_a_steady_peak_is_judged_by_its_own_phases_not_the_first_steps():
    # the cold first step raised the process's peak (exact); the steady step in the same
    # process did not (an upper bound): each figure is judged by its own phases
    device = {"peak_since_reset": False, "peak_bytes": {"total": 100 * MIB}, "retained_bytes": 0,
              "peak_exact": {"total": False},
              "first_step": {"peak_since_reset": False, "peak_bytes": {"total": 100 * MIB}, "retained_bytes": 0,
                             "peak_exact": {"total": True}}}
    as_record = {"status": "ok", "device": "cuda", "device_memory": device}
    assert figures.upper_bound(as_record, "step_peak")
    assert not figures.upper_bound(as_record, "first_step_peak")
