"""Time per phase (median of the harness's repeats) and compile / first-call time."""

from benchmarks.common import Grid, figure


class Time(Grid):
    unit = "seconds"

    def track_forward(self, cache, *cell):
        return figure(cache, cell, "time_s", "forward")

    def track_backward(self, cache, *cell):
        return figure(cache, cell, "time_s", "backward")

    def track_step(self, cache, *cell):
        return figure(cache, cell, "time_s", "step")

    def track_total(self, cache, *cell):
        return figure(cache, cell, "time_s", "total")

    def track_compile(self, cache, *cell):
        return figure(cache, cell, "compile_s")
