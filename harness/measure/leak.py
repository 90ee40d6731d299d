"""Memory that grows every step: the leak figure and its verdict.

A phase of every memory pass, going on from its steady steps: the framework's own
memory read at each steady step's settled start (after gc.collect and malloc_trim, as
every measured step starts), then more steps run the same way, read the same way: on
the host its anonymous and shared-memory pages (what `retained` counts: library code
pages are not its own), on CUDA its allocator's allocated bytes (byte-exact). The steady
steps' readings cost nothing; each further step is paid for within a budget that is a
share of the pass's own wall (`budgets`), so a slow cell runs few or none.

The test, stated (docs/measurement.md, "Memory that grows"):

1. The short check: the steady steps' readings and the one after them, and more steps
   while its budget holds one more (at a step's pace so far) up to SHORT readings.
   *Suspect* when a half of them grows by MIN_BYTES a step or more (Theil-Sen slope: the
   median of the pairwise slopes, which a single jump moves little), when the
   one-sided Mann-Kendall trend test gives p <= SUSPECT_ALPHA, or when they are fewer
   than MIN_STEPS; three or more readings whose range is at most half of what growth of
   MIN_BYTES a step would spread them over are never suspect (`narrow`). Not suspect:
   **flat**.
2. A suspect cell runs on to LONG readings within the longer budget (not started where
   it could not reach MIN_STEPS at the step's pace). Verdict on all:
     grows        each half grows by MIN_BYTES a step or more (Theil-Sen), Mann-Kendall
                  p <= ALPHA, and GROWS_STEPS readings or more: growth that does not stop
     settles      the first half grows, the second does not: a cache filling, an
                  allocator warming up, a compiler meeting new shapes
     flat         neither
     inconclusive fewer than MIN_STEPS readings, or both halves growing with too few
                  readings or too weak a trend to say so
3. The figure, `bytes_per_step`: the Theil-Sen slope of the second half (growth still
   going on at the end), beside the whole run's and each half's.

A step that raises (MemoryError: a --memory-limit reached while growing; anything else)
ends the phase with what was read so far and `stopped` saying why, and so does growth
past GROWTH_CAP_BYTES, before it takes the machine's memory: the record keeps every
figure and the growth measured until then.
"""

import math
import time

#: readings of the short check, and of the run a suspect cell goes on to
SHORT = 8
LONG = 24
#: a half of the run grows when its slope is at least two pages (8 KiB) a step: RSS counts
#: pages, and a framework still settling moves by one now and then (TensorFlow eager unet
#: tiny: +28 KiB over its last 6 steps, one page at a time)
MIN_BYTES = 8192
#: the one-sided Mann-Kendall test's level for `grows`, and the short check's for suspicion
ALPHA = 0.001
SUSPECT_ALPHA = 0.01
#: seconds of extra steps the short check and the longer run may spend, as a share of the
#: memory pass's own wall so far, and their floors and ceilings (seconds)
SHORT_SHARE, SHORT_FLOOR_S, SHORT_CEILING_S = 0.08, 0.5, 4.0
LONG_SHARE, LONG_FLOOR_S, LONG_CEILING_S = 0.15, 2.0, 12.0
#: growth past this ends the phase before it takes the machine's memory (the readings so far judge)
GROWTH_CAP_BYTES = 1 << 30
#: fewer readings than this: no verdict ("inconclusive"); `grows` needs GROWS_STEPS
MIN_STEPS = 6
GROWS_STEPS = 12
VERDICTS = ("flat", "settles", "grows", "inconclusive")


def budgets(pass_wall_s):
    """(short, long) seconds of extra steps for a pass that has run `pass_wall_s` so far."""
    def clamp(share, low, high):
        return min(max(share * pass_wall_s, low), high)
    return clamp(SHORT_SHARE, SHORT_FLOOR_S, SHORT_CEILING_S), clamp(LONG_SHARE, LONG_FLOOR_S, LONG_CEILING_S)


def theil_sen(points):
    """The median of the pairwise slopes of `points` ((step, bytes) pairs): bytes per
    step; 0.0 for fewer than two points."""
    slopes = sorted((b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1:] if b[0] != a[0])
    if not slopes:
        return 0.0
    middle = len(slopes) // 2
    return float(slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2)


def mann_kendall_p(values):
    """One-sided p of the Mann-Kendall test that `values` (in step order) trend upward
    (the normal approximation with the tie correction and a continuity correction); 1.0
    for fewer than 3 values or no upward trend."""
    n = len(values)
    if n < 3:
        return 1.0
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n))
    ties = {}
    for value in values:
        ties[value] = ties.get(value, 0) + 1
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values())) / 18
    if s <= 0 or variance <= 0:
        return 1.0
    z = (s - 1) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def halves(points):
    middle = len(points) // 2
    return points[:middle + len(points) % 2], points[middle:]


def judge(points):
    """{verdict, bytes_per_step, whole_per_step, halves_per_step, p} of own-memory
    readings (step, bytes) at successive steps' starts."""
    first, second = halves(points)
    slopes = [theil_sen(first), theil_sen(second)]
    p = mann_kendall_p([y for _, y in points])
    if narrow(points):
        verdict = "flat"  # growth of MIN_BYTES a step would have spread them wider
    elif len(points) < MIN_STEPS:
        verdict = "inconclusive"
    elif all(s >= MIN_BYTES for s in slopes):  # growing to the end: growth, where enough steps say so
        verdict = "grows" if p <= ALPHA and len(points) >= GROWS_STEPS else "inconclusive"
    elif slopes[0] >= MIN_BYTES and slopes[1] < MIN_BYTES:
        verdict = "settles"
    else:
        verdict = "flat"
    return {"verdict": verdict, "bytes_per_step": slopes[1], "whole_per_step": theil_sen(points),
            "halves_per_step": slopes, "p": round(p, 6)}


def narrow(points):
    """Three or more readings whose whole range is at most half what growth of MIN_BYTES a
    step would spread them over: flat however few they are (a slow cell's steady steps)."""
    if len(points) < 3:
        return False
    values = [y for _, y in points]
    return max(values) - min(values) <= (points[-1][0] - points[0][0]) * MIN_BYTES / 2


def suspect(points):
    """Worth the longer run: too few readings to judge (unless none moved by MIN_BYTES),
    a half growing by MIN_BYTES a step, or an upward trend at SUSPECT_ALPHA."""
    if narrow(points):
        return False
    return (len(points) < MIN_STEPS or any(theil_sen(h) >= MIN_BYTES for h in halves(points))
            or mann_kendall_p([y for _, y in points]) <= SUSPECT_ALPHA)


def run(step_once, read, settle, first_step=0, prior=(), step_s=0.0, short=SHORT, long=LONG,
        budgets_s=(2.0, 10.0)):
    """The leak phase, going on from `prior` ((step, bytes) read at the settled starts of
    the steps just run, e.g. the steady ones): `settle()` and `read()` (own bytes now)
    before each further `step_once()`, while the short check's budget holds another step
    (`step_s` seconds each, at least, as the steps before took) and it has fewer than
    `short` readings; where `suspect`, on to `long` readings within the longer budget,
    if that could reach MIN_STEPS. The record's `leak`."""
    short_s, long_s = budgets_s
    points, stopped, extended = list(prior), None, False
    started = time.monotonic()
    deadline = started + short_s
    step = first_step
    settle()
    points.append((step, int(read())))  # the start of the step after the last one read
    while True:
        room = time.monotonic() + step_s <= deadline
        goal = long if extended else short
        if len(points) >= goal or not room:
            if extended:
                if len(points) < long:
                    stopped = f"the longer run's {long_s:.3g} s of steps held {len(points)} of {long} readings"
                break
            if not suspect(points):
                break
            if len(points) + long_s / max(step_s, 1e-9) < MIN_STEPS:
                stopped = (f"a step takes {step_s:.3g} s: the longer run's {long_s:.3g} s would not reach "
                           f"{MIN_STEPS} readings")
                break
            extended, deadline = True, time.monotonic() + long_s
            continue
        begun = time.monotonic()
        try:
            step_once()
        except MemoryError:
            stopped = f"out of memory in step {step + 1} while measuring growth"
            break
        except Exception as err:  # noqa: BLE001 - the phase ends; the figures taken stand
            stopped = f"step {step + 1} raised {type(err).__name__}: {str(err)[:200]}"
            break
        step += 1
        settle()
        points.append((step, int(read())))
        step_s = max(step_s, time.monotonic() - begun)
        if points[-1][1] - points[0][1] > GROWTH_CAP_BYTES:
            stopped = (f"grew by {(points[-1][1] - points[0][1]) >> 20} MiB in {step - points[0][0]} steps: stopped "
                       f"before it takes the machine's memory")
            break
    found = judge(points)
    found.update(readings=len(points), from_steady=len(prior), extended=extended, steps=[s for s, _ in points],
                 samples=[b for _, b in points], budgets_s=[round(b, 3) for b in budgets_s],
                 wall_s=round(time.monotonic() - started, 3),
                 method="own memory at each settled step's start, going on from the steady steps; Theil-Sen "
                        "slope of each half against the step, one-sided Mann-Kendall (harness/measure/leak.py)")
    if stopped:
        found["stopped"] = stopped
    return found
