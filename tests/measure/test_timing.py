"""The time pass's repeats (harness/measure/timing.py) on scripted steps: when they stop,
which steps the figure comes from, and when a time is marked noisy. No worker, no
framework: a fake clock and a fake machine probe, so every case is exact."""

import math

import pytest

from harness.measure import timing
from harness.measure.timing import Policy, Repeats


class Script:
    """Steps with scripted wall times, and a machine whose other processes use
    `others[i]` CPUs during step i (the probe reads a fake monotonic clock)."""

    def __init__(self, walls, others):
        self.walls, self.others = list(walls), list(others)
        self.now = self.own = self.busy = 0.0
        self.index = 0

    def read(self):
        return self.now, self.own, self.busy

    def step_once(self):
        wall = self.walls[min(self.index, len(self.walls) - 1)]
        share = self.others[min(self.index, len(self.others) - 1)]
        self.index += 1
        self.now += wall
        self.own += wall  # one CPU busy with our step
        self.busy += wall * (1 + share)
        return FakeMeter(wall)


class FakeMeter:
    def __init__(self, wall):
        self.samples = {"forward": [wall / 2], "backward": [wall / 2], "total": [wall]}
        self.cpu_samples = {"forward": [wall / 2], "backward": [wall / 2], "total": [wall]}


def run(walls, others, monkeypatch, **policy):
    script = Script(walls, others)
    # the budget is counted on the scripted clock, not the real one
    monkeypatch.setattr(timing.time, "monotonic", lambda: script.now)
    monkeypatch.setattr(timing.gc, "collect", lambda: 0)
    repeats = Repeats(Policy(**policy), probe=script).run(script.step_once)
    return repeats, repeats.summary()


def test_steady_quiet_steps_stop_at_the_minimum_and_are_not_noisy(monkeypatch):
    repeats, out = run([0.100, 0.101, 0.099, 0.100, 0.102], [0.0], monkeypatch)
    assert repeats.stopped_by == "precision" and out["time_stats"]["samples"] == 5
    assert out["time_s"]["total"] == pytest.approx(0.100)
    assert out["time_min_s"]["total"] == pytest.approx(0.099)
    assert out["cpu_time_s"]["total"] == pytest.approx(0.100)
    assert out["time_noisy"] is False and out["time_noise"] == []


def test_steps_go_on_until_the_median_is_known_within_the_precision(monkeypatch):
    # alternating 0.10 / 0.12: min..max is +-9 % of the median at 5 steps; with more
    # steps the order-statistic interval of the median tightens onto one of the values
    walls = [0.10, 0.12] * 20 + [0.11] * 200
    repeats, out = run(walls, [0.0], monkeypatch, precision=0.03, budget_s=100)
    n = out["time_stats"]["samples"]
    assert n > 5 and repeats.stopped_by == "precision"
    assert out["time_stats"]["median_half_width"] <= 0.03


def test_a_steadily_loaded_machine_is_noisy_even_when_the_spread_is_narrow(monkeypatch):
    # The planted-load case: every step 3x slower and perfectly steady. The spread says
    # nothing; the machine probe sees another process on a CPU the whole time.
    repeats, out = run([0.300], [1.0], monkeypatch, budget_s=4)
    assert out["time_noisy"] is True
    assert out["time_noise"][0].startswith("contended: other processes used 1.00 CPUs")
    assert repeats.stopped_by == "contended"  # past a quarter of the budget at the 5th step
    assert out["time_stats"]["timed_s"] == pytest.approx(1.5)  # the 5 steps of the minimum


def test_contended_steps_are_left_out_when_enough_clean_ones_remain(monkeypatch):
    # A burst of load (3x slower steps while another process runs) in the middle of
    # otherwise quiet 0.2 s steps: the figure is the quiet median, and not noisy.
    walls = [0.2] * 3 + [0.6] * 4 + [0.2] * 30
    others = [0.0] * 3 + [1.0] * 4 + [0.0] * 30
    _, out = run(walls, others, monkeypatch, budget_s=100)
    assert out["time_s"]["total"] == pytest.approx(0.2)
    assert out["time_noisy"] is False
    assert out["time_stats"]["used"] == out["time_stats"]["clean"] < out["time_stats"]["samples"]


def test_a_wide_spread_that_does_not_settle_is_noisy(monkeypatch):
    walls = [0.1, 0.3, 0.1, 0.5, 0.2, 0.1, 0.4] * 20
    repeats, out = run(walls, [0.0], monkeypatch, budget_s=5)
    assert repeats.stopped_by == "budget"
    reasons = " ".join(out["time_noise"])
    assert out["time_noisy"] and "spread" in reasons and "imprecise" in reasons
    iqr, mid = out["time_spread_s"]["total"], out["time_s"]["total"]
    assert iqr / mid > timing.NOISY_SPREAD  # the rule the table relies on


def test_exact_repeats_when_the_budget_is_zero(monkeypatch):
    repeats, out = run([0.1, 0.5, 0.1], [0.0], monkeypatch, min_repeats=3, budget_s=0)
    assert repeats.stopped_by == "repeat" and out["time_stats"]["samples"] == 3


def test_median_interval_is_the_order_statistic_interval():
    values = list(range(1, 11))  # n = 10: P(B(10, 1/2) < 2) = 11/1024 <= 5 % < P(B < 3)
    assert timing.median_interval(values) == (2, 9)
    assert timing.median_interval([5.0, 1.0, 3.0, 4.0, 2.0]) == (1.0, 5.0)  # n = 5: min..max
    assert timing.median_interval([7.0]) == (7.0, 7.0)
    assert math.isclose(timing.relative_half_width([0.9, 1.0, 1.1, 1.0, 1.0]), 0.1)


def test_short_steps_are_judged_in_blocks_of_half_a_second():
    # 10 ms steps: a 10 ms tick either lands in a step or not, so one step's reading
    # is 0 or 1+ CPUs; over a block the readings average out.
    shares = timing.block_others([0.01] * 100, [0.0, 1.0] * 50)
    assert shares[:50] == [pytest.approx(0.5)] * 50 and len(shares) == 100


def test_machine_probe_sees_this_process_and_the_machine():
    t, own, busy = timing.MachineProbe().read()
    assert own > 0 and (busy is None or busy >= 0)
    assert timing.others_cpus((0.0, 1.0, 10.0), (1.0, 1.5, 11.5)) == pytest.approx(1.0)
    assert timing.others_cpus((0.0, 1.0, None), (1.0, 1.5, 11.5)) is None


def test_the_clean_limit_grows_with_the_cpus_the_worker_leaves_spare(monkeypatch):
    # The 2-core box with 2 threads keeps the flat limit: a competitor there takes a CPU
    # from the worker's pool. A 16-CPU GPU host with 2 threads has 14 spare CPUs: 0.7 CPUs
    # of other processes (what its quiet time passes read) run beside the worker.
    assert timing.clean_others(2, 2) == timing.CLEAN_OTHERS
    assert timing.clean_others(1, 2) == timing.CLEAN_OTHERS  # more threads than CPUs: no spare
    assert timing.clean_others(16, 2) == pytest.approx(0.25 + 0.25 * 14)
    _, busy_small = run([0.1], [0.7], monkeypatch, budget_s=2, clean_others=timing.clean_others(2, 2))
    _, busy_large = run([0.1], [0.7], monkeypatch, budget_s=2, clean_others=timing.clean_others(16, 2))
    assert busy_small["time_noisy"] and "clean below 0.25" in busy_small["time_noise"][0]
    assert not busy_large["time_noisy"] and busy_large["time_stats"]["policy"]["clean_others"] == 3.75


def test_a_job_takes_its_limit_from_this_machine_and_the_thread_count(monkeypatch):
    monkeypatch.setenv("GRADMEM_THREADS", "2")
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert Policy.from_job({}).clean_others == 3.75
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: {0, 1})
    assert Policy.from_job({}).clean_others == timing.CLEAN_OTHERS
