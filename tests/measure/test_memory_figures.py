"""The three memory figures and the breakdown: the meter's arithmetic on a scripted
probe, the schema's checks, and the breakdown's assembly."""

import copy
import sys

import pytest

from harness import results
from harness.measure import breakdown
from harness.measure.memory_meter import MemoryMeter, median_step
from harness.units import MIB

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/report")
from report_fixtures import fixture_record  # noqa: E402


class ScriptedRss:
    """An RSS probe whose readings are given: current() and hwm() pop the next value."""

    def __init__(self, baseline, readings):
        self.baseline, self.readings = baseline, list(readings)
        self.baseline_kinds = {"anon": baseline - 4096, "file": 4096}

    def reset(self):
        pass

    def current(self):
        return self.readings.pop(0)

    def current_with_kinds(self):  # 4 KiB of code pages mapped, the rest heap
        value = self.readings.pop(0)
        return value, {"anon": value - 4096, "file": 4096}

    def hwm(self):
        return self.readings.pop(0)

    def hwm_and_file(self):  # the same 4 KiB of code pages: none paged in by the step
        return self.readings.pop(0), 4096


class NoMarks:
    def mark(self, name):
        pass


def measured_step(baseline, start, forward_hwm, after_forward, backward_hwm, after_backward):
    meter = MemoryMeter(ScriptedRss(baseline, [start, forward_hwm, after_forward, backward_hwm, after_backward]),
                        NoMarks())
    meter.start("")
    meter.begin_step()
    meter.begin("forward")
    meter.end("forward", live="after_forward")
    meter.begin("backward")
    meter.end("backward", live="after_backward")
    return meter.figures()


def test_step_peak_is_above_the_steps_start_and_footprint_adds_retained():
    # 100 MiB resident before the first step; 30 MiB kept since; the step climbs to 20
    # MiB above its start in forward and 25 MiB in backward.
    figures = measured_step(100 * MIB, 130 * MIB, 150 * MIB, 148 * MIB, 155 * MIB, 131 * MIB)
    assert figures["retained_bytes"] == 30 * MIB
    assert figures["retained_detail_bytes"] == {"anon": 30 * MIB, "file": 0}
    assert figures["peak_bytes"] == {"forward": 20 * MIB, "backward": 25 * MIB, "total": 25 * MIB}
    assert figures["footprint_bytes"] == {"forward": 50 * MIB, "backward": 55 * MIB, "total": 55 * MIB}
    assert figures["live_bytes"] == {"after_forward": 18 * MIB, "after_backward": 1 * MIB}


def test_the_steady_state_is_one_whole_step_the_median():
    steps = [measured_step(0, r, r + p, r, r + p, r) for r, p in ((10, 7), (30, 5), (20, 6))]
    chosen = median_step(steps)
    assert chosen["peak_bytes"]["total"] == 6 and chosen["retained_bytes"] == 20
    assert chosen["footprint_bytes"]["total"] == 26  # from the same step: still adds up


def test_schema_checks_that_footprint_is_retained_plus_peak_per_phase():
    record = fixture_record()
    results.validate(record)
    broken = copy.deepcopy(record)
    broken["footprint_bytes"]["backward"] += 4096
    with pytest.raises(results.SchemaError, match=r"footprint_bytes\['backward'\].*retained_bytes \+ peak_bytes"):
        results.validate(broken)
    broken = copy.deepcopy(record)
    broken["first_step_retained_bytes"] = 1.5
    with pytest.raises(results.SchemaError, match="first_step_retained_bytes must be an int"):
        results.validate(broken)


def test_schema_1_records_are_refused_with_the_reason_and_the_way_out():
    with pytest.raises(results.SchemaError, match="schema 1.*older gradmem.*re-run.*splits"):
        results.validate(dict(fixture_record(), schema=1))


def test_a_breakdown_names_every_category_and_says_how_or_why_not():
    record = fixture_record()
    record["breakdown_bytes"]["saved_activations"] = None
    record["breakdown_method"]["saved_activations"] = "no way to see"
    results.validate(record)  # null is fine when the method says why
    record["breakdown_method"]["saved_activations"] = ""
    with pytest.raises(results.SchemaError, match="say how it was counted"):
        results.validate(record)
    del record["breakdown_bytes"]["temporaries"]
    with pytest.raises(results.SchemaError, match="exactly the keys"):
        results.validate(record)


def counted(saved, gradients=4 * MIB):
    return {
        "params": (4 * MIB, "m"), "inputs": (MIB, "m"), "gradients": (gradients, "m"),
        "optimizer_state": (0, "m"), "saved_activations": saved,
    }


def steady(peak, after_forward):
    return {"peak_bytes": {"total": peak}, "live_bytes": {"after_forward": after_forward}}


def test_temporaries_are_the_step_peak_less_saved_and_gradients_never_below_zero():
    values, methods = breakdown.assemble(counted((20 * MIB, "hook")), steady(30 * MIB, 21 * MIB))
    assert values["temporaries"] == 6 * MIB and values["saved_activations"] == 20 * MIB
    values, _ = breakdown.assemble(counted((40 * MIB, "hook")), steady(30 * MIB, 21 * MIB))
    assert values["temporaries"] == 0
    assert set(values) == set(methods) == set(results.BREAKDOWN_KEYS)


def test_adapters_without_a_list_of_saved_tensors_get_the_rss_figure_and_say_so():
    values, methods = breakdown.assemble(counted((None, breakdown.RSS_METHOD)), steady(30 * MIB, 21 * MIB))
    assert values["saved_activations"] == 21 * MIB
    assert "resident bytes live at the end of forward" in methods["saved_activations"]


def test_a_null_saved_figure_keeps_temporaries_null_with_the_reason():
    values, methods = breakdown.assemble(counted((None, "cannot see")), steady(30 * MIB, 21 * MIB))
    assert values["saved_activations"] is None and values["temporaries"] is None
    assert methods["saved_activations"] == "cannot see" and methods["temporaries"]


class ScriptedAllocator:
    """A device allocator probe: bytes allocated now, and the peak since reset()."""

    peak_since_reset = True

    def __init__(self):
        self.now = self.top = 0

    def reset(self):
        self.top = self.now

    def current_bytes(self):
        return self.now

    def peak_bytes(self):
        return self.top

    def allocate(self, nbytes):
        self.now += nbytes
        self.top = max(self.top, self.now)


def test_the_device_meter_gives_the_same_three_figures_from_the_allocator():
    from harness.measure.cuda import DeviceMeter

    probe = ScriptedAllocator()
    probe.allocate(100)  # params and inputs, before the baseline
    meter = DeviceMeter(probe)
    meter.set_baseline()
    probe.allocate(30)  # kept from the first step (a cuBLAS workspace, say)
    meter.start()
    meter.begin_step()
    meter.begin("forward")
    probe.allocate(50)
    meter.end("forward")
    meter.begin("backward")
    probe.allocate(20)
    probe.allocate(-60)
    meter.end("backward")
    figures = meter.figures()
    assert figures["retained_bytes"] == 30
    assert figures["peak_bytes"] == {"forward": 50, "backward": 70, "total": 70}
    assert figures["footprint_bytes"] == {"forward": 80, "backward": 100, "total": 100}
    record = fixture_record(device_memory=figures)
    results.validate(record)  # the schema checks the device's sum too
    record["device_memory"]["footprint_bytes"]["total"] += 1
    with pytest.raises(results.SchemaError, match="device_memory.footprint_bytes"):
        results.validate(record)
