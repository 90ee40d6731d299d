"""Time per phase (median of the harness's repeats) and compile / first-call time;
and whether the cell's time is noisy (advisory: tools/asv_gate.py does not fail on it)."""

import math

from benchmarks.common import VERSION, Grid, figure

# The time figures' own method, on top of the suite's VERSION: since adaptive-clean-1 a median
# over repeats chosen per cell, from the steps no other process disturbed, with the
# time pass alone on the machine. Bumping it restarts the time series only.
TIME_METHOD = "adaptive-clean-1"


class Time(Grid):
    unit = "seconds"
    version = f"{VERSION}+{TIME_METHOD}"

    def track_forward(self, cache, *cell):
        return figure(cache, cell, "time.forward")

    def track_backward(self, cache, *cell):
        return figure(cache, cell, "time.backward")

    def track_step(self, cache, *cell):
        return figure(cache, cell, "time.step")

    def track_total(self, cache, *cell):
        return figure(cache, cell, "time")

    def track_compile(self, cache, *cell):
        return figure(cache, cell, "first_step_time")


class TimeNoise(Grid):
    """1 when the harness marked the cell's time noisy (other processes took a CPU, or
    the repeats spread widely: harness/measure/timing.py), 0 when not, NaN without a
    record or from a harness older than the mark."""

    unit = "noisy"
    version = f"{VERSION}+{TIME_METHOD}"

    def track_noisy(self, cache, *cell):
        record = cache.get(tuple(cell))
        if record is None or record.get("status") != "ok" or "time_noisy" not in record:
            return math.nan
        return 1.0 if record["time_noisy"] else 0.0
