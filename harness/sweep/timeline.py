"""A memory timeline of a worker: its RSS sampled every few ms *from the parent*.

Why our own sampler, and why outside the worker: memory_profiler's ``memory_usage``
either forks a monitor (JAX warns of deadlocks after fork; with
``include_children`` it counts the monitor itself, 2-4x too high: docs/design.md,
Evidence) or runs a thread in the measured process. A thread in the worker takes the
GIL from the step it watches and allocates while it does. Reading
``/proc/<pid>/statm`` of the worker from a thread of the parent costs the worker
nothing: one ``pread`` per sample of a file the kernel fills on demand.

The worker's phase marks are stamped with CLOCK_MONOTONIC, the same clock the samples
use, so the two line up. The timeline runs from the worker's ``baseline`` mark to the
end of its steady step; it is thinned (each stride keeps its maximum, so no peak is
lost) to at most MAX_POINTS samples to keep the record small. Sampling misses spikes
shorter than the interval; the peaks in the record come from VmHWM, not from here.
"""

import os
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
INTERVAL_S = 0.002
MAX_POINTS = 1000


class RssSampler:
    def __init__(self, pid, interval_s=INTERVAL_S):
        self.pid, self.interval_s = pid, interval_s
        self.t, self.rss = [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        try:
            fd = os.open(f"/proc/{self.pid}/statm", os.O_RDONLY)
        except OSError:
            return  # the worker is already gone
        try:
            while not self._stop.is_set():
                try:
                    fields = os.pread(fd, 128, 0).split()
                except OSError:
                    return  # the worker exited
                if len(fields) < 2:
                    return
                self.t.append(time.monotonic())
                self.rss.append(int(fields[1]) * PAGE)
                self._stop.wait(self.interval_s)
        finally:
            os.close(fd)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=2.0)


def build(sampler, marks, start="baseline", end="end"):
    """The record's timeline from samples and [(t, name)] marks, or None.

    Times are seconds since the `start` mark; marks inside the window are kept.
    """
    times = dict((name, t) for t, name in marks)
    if start not in times or not sampler.t:
        return None
    t0 = times[start]
    t1 = times.get(end, sampler.t[-1])
    pairs = [(t, b) for t, b in zip(sampler.t, sampler.rss) if t0 <= t <= t1]
    if len(pairs) < 2:
        return None
    t_s, rss = thin([t - t0 for t, _ in pairs], [b for _, b in pairs])
    kept = [[round(t - t0, 6), name] for t, name in marks if t0 <= t <= t1 and name not in (start, end)]
    return {
        "t_s": [round(t, 6) for t in t_s],
        "rss_bytes": rss,
        "marks": kept,
        "interval_s": sampler.interval_s,
        "samples": len(pairs),
        "source": "parent reads /proc/<worker pid>/statm",
    }


def thin(times, values, limit=MAX_POINTS):
    """At most ~`limit` points; each stride is represented by its largest sample."""
    if len(values) <= limit:
        return list(times), list(values)
    stride = -(-len(values) // limit)
    out_t, out_v = [], []
    for begin in range(0, len(values), stride):
        chunk = values[begin : begin + stride]
        top = max(range(len(chunk)), key=chunk.__getitem__)
        out_t.append(times[begin + top])
        out_v.append(chunk[top])
    return out_t, out_v
