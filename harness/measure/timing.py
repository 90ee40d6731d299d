"""The time pass's repeats: how many, which figure they give, and when it is `noisy`.

Worker side. After the cold first step and the warm-up, steps are timed one by one
(wall clock per phase, and the process's CPU time, user + sys of all its threads), and
around each step the machine is read: how many CPU-seconds *other* processes used
while it ran (`MachineProbe`). On a 2-core machine a competing process stalls the
two-thread BLAS/OpenMP pools (a step 2-4x slower), and it does so steadily, so the
spread alone cannot tell a loaded machine from a slow framework; the machine can.

Repeats (`Policy`): at least `min_repeats`; then on while the median is not known to
within `precision` (the half-width of its distribution-free 90 % confidence interval,
relative to it) and the `budget_s` of timed steps is not spent (`max_repeats` caps
fast cells; a cell whose steps were mostly contended stops after a quarter of the
budget, because a loaded machine rarely clears within it). The figure is the median
of the *clean* steps, those during which other processes used less than
`clean_others` CPUs (0.25 where the worker's threads fill the machine, more where they
leave CPUs spare; judged over blocks of consecutive steps at least `BLOCK_S` long,
because /proc/stat counts in 10 ms ticks); where fewer than `min_repeats` steps were
clean, of all steps, and the cell is noisy.

A time is `noisy` (the record says why, the table and page mark it, the asv gate
treats it as advisory) when:
- *contended*: fewer than `min_repeats` clean steps (other processes took a CPU);
- *spread*: the interquartile range is above `NOISY_SPREAD` of the median;
- *imprecise*: the median's interval half-width is still above `NOISY_PRECISION`
  when the budget ran out.
"""

import gc
import math
import os
import time
from dataclasses import dataclass

from harness.frameworks import threads
from harness.measure.stats import median, percentile, spread

CLEAN_OTHERS = 0.25  # CPUs other processes may use during a step that still counts as clean
SPARE_SHARE = 0.25  # and this much of each CPU the worker's threads leave spare (clean_others)
BLOCK_S = 0.5  # steps are judged in blocks of at least this many seconds (10 ms ticks)
CONFIDENCE = 0.90  # of the median's interval (order statistics, no distribution assumed)
NOISY_SPREAD = 0.25  # IQR / median above this: noisy
NOISY_PRECISION = 0.10  # interval half-width / median above this at the end: noisy
GIVE_UP_FRACTION = 0.25  # of the budget, after which a mostly contended cell stops
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass
class Policy:
    """How many timed steps; the defaults are the sweep's (`python -m harness run`)."""

    min_repeats: int = 5
    precision: float = 0.05  # "known within a few percent", and cheap enough for a sweep
    budget_s: float = 2.0  # seconds of timed steps after which none is added (the minimum always runs)
    max_repeats: int = 200
    clean_others: float = CLEAN_OTHERS  # CPUs of other processes below which a step is clean

    @classmethod
    def from_job(cls, job):
        return cls(
            min_repeats=int(job.get("repeat", cls.min_repeats)),
            precision=float(job.get("precision", cls.precision)),
            budget_s=float(job.get("time_budget_s", cls.budget_s)),
            max_repeats=int(job.get("max_repeats", cls.max_repeats)),
            clean_others=clean_others(len(os.sched_getaffinity(0)), threads.thread_count()),
        )


def clean_others(cpus, worker_threads):
    """CPUs other processes may use during a clean step on a machine of `cpus` CPUs whose
    worker runs `worker_threads` threads: CLEAN_OTHERS where the threads fill the machine
    (on 2 CPUs running 2 threads a competitor takes a CPU from them and stalls the pool), plus
    SPARE_SHARE of each CPU they leave spare, where other processes run beside them
    rather than on them (a 16-CPU GPU host with 2 threads: 3.75; there, time passes that
    measured alone read up to 0.9 CPUs of others, and 13 of 29 were marked contended
    under 0.25)."""
    return CLEAN_OTHERS + SPARE_SHARE * max(0, cpus - worker_threads)


class MachineProbe:
    """CPU-seconds used so far by this process (all threads) and by the whole machine
    (every CPU's non-idle time, host steal included, from /proc/stat)."""

    def __init__(self, path="/proc/stat"):
        self.path = path
        self.available = os.path.exists(path)

    def read(self):
        """(monotonic s, own CPU s, machine busy CPU s or None)."""
        return time.monotonic(), time.process_time(), self._machine_busy()

    def _machine_busy(self):
        if not self.available:
            return None
        with open(self.path, encoding="ascii") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal (guest is inside user)
        busy = sum(fields[:8]) - fields[3] - fields[4]
        return busy * TICK_S


def others_cpus(before, after):
    """CPUs (CPU-seconds per second) used by everything but this process between two
    probe readings; None where the machine cannot be read."""
    (t0, own0, busy0), (t1, own1, busy1) = before, after
    if busy0 is None or busy1 is None or t1 <= t0:
        return None
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / (t1 - t0)


def median_interval(values, confidence=CONFIDENCE):
    """(low, high): a distribution-free interval for the median from order statistics;
    with fewer samples than it needs, min..max (which then covers the median less often)."""
    ordered = sorted(values)
    n = len(ordered)
    tail = (1.0 - confidence) / 2.0
    j, cumulative = 0, 0.0  # largest j with P(Binomial(n, 1/2) < j) <= tail
    while j < n // 2:
        cumulative += math.comb(n, j) / 2.0**n
        if cumulative > tail:
            break
        j += 1
    j = max(j, 1)
    return ordered[j - 1], ordered[n - j]


def relative_half_width(values):
    mid = median(values)
    low, high = median_interval(values)
    return max(mid - low, high - mid) / mid if mid > 0 else math.inf


def block_others(walls, others):
    """Per step: the CPUs other processes used during its block (consecutive steps
    adding up to >= BLOCK_S; a short last block is judged on its own, more coarsely).
    None entries (no /proc/stat) count as 0."""
    shares, block = [], []
    busy_sum = wall_sum = 0.0

    def close():
        shares.extend([busy_sum / wall_sum if wall_sum > 0 else 0.0] * len(block))

    for index, (wall, share) in enumerate(zip(walls, others)):
        block.append(index)
        wall_sum += wall
        busy_sum += (share or 0.0) * wall
        if wall_sum >= BLOCK_S:
            close()
            block, busy_sum, wall_sum = [], 0.0, 0.0
    if block:
        close()
    return shares


class Repeats:
    """Timed steps of one cell: run with `run(step_once)`, then `summary()`."""

    def __init__(self, policy, probe=None):
        self.policy = policy
        self.probe = probe or MachineProbe()
        self.phases = {}  # phase -> [wall s per step]
        self.cpu = {}  # phase -> [CPU s per step]
        self.others = []  # per step: CPUs used by other processes, or None
        self.stopped_by = None
        self.timed_s = 0.0
        self.load_average = None

    def run(self, step_once, marks=None):
        """Call `step_once(meter_samples)` until the policy says stop. `step_once` runs
        one step under a TimeMeter and returns it."""
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        while True:
            gc.collect()  # outside the clock: a collection lands in no particular step
            before = self.probe.read()
            meter = step_once()
            after = self.probe.read()
            self._add(meter, others_cpus(before, after))
            self.timed_s = time.monotonic() - started
            self.stopped_by = self._stop()
            if self.stopped_by:
                break
        self.load_average = [load_before, os.getloadavg()[0]]
        return self

    def _add(self, meter, others):
        for phase, values in meter.samples.items():
            self.phases.setdefault(phase, []).extend(values)
        for phase, values in meter.cpu_samples.items():
            self.cpu.setdefault(phase, []).extend(values)
        self.others.append(others)

    def _stop(self):
        p, n = self.policy, len(self.others)
        if n < p.min_repeats:
            return None
        if p.budget_s <= 0:
            return "repeat"
        clean = [i for i, ok in enumerate(self._clean()) if ok]
        if len(clean) >= p.min_repeats and relative_half_width([self.phases["total"][i] for i in clean]) <= p.precision:
            return "precision"
        if self.timed_s >= p.budget_s:
            return "budget"
        if n >= p.max_repeats:
            return "max_repeats"
        if self.timed_s >= GIVE_UP_FRACTION * p.budget_s and len(clean) < n / 2:
            return "contended"  # a loaded machine rarely clears within the budget: noisy now
        return None

    def _clean(self):
        limit = self.policy.clean_others
        return [share < limit for share in block_others(self.phases["total"], self.others)]

    def _used_indices(self):
        clean = [i for i, ok in enumerate(self._clean()) if ok]
        return clean if len(clean) >= self.policy.min_repeats else list(range(len(self.others)))

    def summary(self, fold=()):
        """The record's time figures: medians, minima, IQRs and CPU medians per phase
        over the steps used, every sample, and whether (and why) the time is noisy."""
        clean = self._clean()
        used = self._used_indices()
        pick = lambda values: [values[i] for i in used]  # noqa: E731
        phases = {k: v for k, v in self.phases.items() if k not in fold}
        total = pick(self.phases["total"])
        mid = median(total)
        half_width = relative_half_width(total)
        iqr = spread(total)
        reasons = []
        blocks = block_others(self.phases["total"], self.others)
        contended = [share for share in blocks if share >= self.policy.clean_others]
        if sum(clean) < self.policy.min_repeats:
            reasons.append(
                f"contended: other processes used {median(contended) if contended else 0:.2f} CPUs "
                f"(median) during {len(contended)} of {len(clean)} timed steps "
                f"(a step is clean below {self.policy.clean_others:g})"
            )
        if mid > 0 and iqr / mid > NOISY_SPREAD:
            reasons.append(f"spread: the interquartile range is {iqr / mid:.0%} of the median (> {NOISY_SPREAD:.0%})")
        if half_width > NOISY_PRECISION and len(total) > 1:
            reasons.append(
                f"imprecise: the median is known within +-{half_width:.0%} "
                f"({CONFIDENCE:.0%} interval, {len(total)} steps; > {NOISY_PRECISION:.0%})"
            )
        walls = self.phases["total"]
        known = [(share, wall) for share, wall in zip(self.others, walls) if share is not None]
        # over all timed steps: CPU-seconds other processes used per second of steps
        others_mean = sum(s * w for s, w in known) / sum(w for _, w in known) if known else None
        return {
            "time_s": {k: median(pick(v)) for k, v in phases.items()},
            "time_min_s": {k: min(pick(v)) for k, v in phases.items()},
            "time_spread_s": {k: spread(pick(v)) for k, v in phases.items()},
            "time_samples_s": phases,
            "cpu_time_s": {k: median(pick(v)) for k, v in self.cpu.items() if k not in fold},
            "time_noisy": bool(reasons),
            "time_noise": reasons,
            "time_stats": {
                "samples": len(self.others),
                "used": len(used),
                "clean": int(sum(clean)),
                "median_half_width": round(half_width, 4) if math.isfinite(half_width) else None,
                "confidence": CONFIDENCE,
                "others_cpus": round(others_mean, 3) if others_mean is not None else None,
                "others_cpus_per_step": [None if s is None else round(s, 3) for s in self.others],
                "others_cpus_per_block": [round(share, 3) for share in blocks],
                "p90_s": percentile(total, 90),
                "stopped_by": self.stopped_by,
                "timed_s": round(self.timed_s, 3),
                "policy": vars(self.policy),
                "load_average_1min": self.load_average,
            },
        }
