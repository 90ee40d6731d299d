"""Memory that grows every step: the leak figure and its verdict.

The last phase of a memory pass (after every other measured figure, its result written
first: a step that runs out of memory while growing leaves that record, and this
phase's own says how far it got). More steps, each preceded by what precedes every
measured step (gc.collect, malloc_trim), and the framework's own memory read at each
step's start: on the host its anonymous and shared-memory pages (what `retained`
counts: library code pages are not its own), on CUDA its allocator's allocated bytes
(byte-exact).

The test, stated (docs/measurement.md, "Memory that grows"):

0. One step unread (the first after the pass's other phases allocates what they left
   to it), then a reading before each further step.
1. A short check of SHORT readings, or as many as its budget holds (a share of the
   pass's own wall: `budgets`). *Suspect* when too few were read, when either half
   grows by MIN_BYTES a step or more (Theil-Sen slope: the median of the pairwise
   slopes, which a single jump does not move much), or when the one-sided
   Mann-Kendall trend test gives p <= SUSPECT_ALPHA. Not suspect: **flat**, and the
   phase ends here.
2. A suspect cell runs on to LONG readings within the longer budget. Verdict on all:
     grows        each half grows by MIN_BYTES a step or more (Theil-Sen), Mann-Kendall
                  p <= ALPHA, and GROWS_STEPS readings or more: growth that does not stop
     settles      the first half grows, the second does not: a cache filling, an
                  allocator warming up, a compiler meeting new shapes
     flat         neither
     inconclusive fewer than MIN_STEPS readings (a step too slow for the budget; a
                  longer run that could not reach MIN_STEPS is not started), or both
                  halves growing with too few readings or too weak a trend to say so
   Three or more readings none of which moved by MIN_BYTES are flat, however few.
3. The figure, `bytes_per_step`: the Theil-Sen slope of the second half (growth still
   going on at the end), beside the whole run's and each half's.

Where a step is too slow for the budgets (a steady step, timed in the pass, longer than
the short check's budget: no step is run) or the phase's readings come to fewer than
MIN_STEPS, the readings the pass took at its settled steps' starts (the warm-up's, the
steady steps', the breakdown's; `from_pass` counts them) join its own: what the pass
has shown of growth, at no cost of steps. A step that raises (MemoryError while
growing, anything else) ends the phase with what was read so far and `stopped` saying why.
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
    spread = max(y for _, y in points) - min(y for _, y in points) if points else 0
    if len(points) >= 3 and spread < MIN_BYTES:
        verdict = "flat"  # no reading moved by MIN_BYTES: growth of MIN_BYTES a step would have
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


def suspect(points):
    """Worth the longer run: too few readings to judge (unless none moved by MIN_BYTES),
    a half growing by MIN_BYTES a step, or an upward trend at SUSPECT_ALPHA."""
    if len(points) >= 3 and max(y for _, y in points) - min(y for _, y in points) < MIN_BYTES:
        return False
    return (len(points) < MIN_STEPS or any(theil_sen(h) >= MIN_BYTES for h in halves(points))
            or mann_kendall_p([y for _, y in points]) <= SUSPECT_ALPHA)


def run(step_once, read, settle, first_step=0, short=SHORT, long=LONG, budgets_s=(2.0, 10.0), prior=(),
        step_s=0.0):
    """The leak phase: `settle()`, `read()` (own bytes now) and `step_once()` until the
    short check has `short` readings or its budget is spent (the step counter starts at
    `first_step`, the steps the pass ran before); where `suspect`, on to `long`
    readings within the longer budget. Where those come to fewer than MIN_STEPS (a step,
    `step_s` seconds, too slow for the budgets: then no step is run at all), the
    readings the pass took at its settled steps' starts (`prior`, (step, bytes)) join
    them. The record's `leak`."""
    short_s, long_s = budgets_s
    if step_s >= short_s:  # not one more step in the short check: the pass's own readings judge
        settle()
        return _found(list(prior) + [(first_step, int(read()))], False, budgets_s, len(prior),
                      f"a step takes {step_s:.3g} s, more than the short check's {short_s:.3g} s: judged on the "
                      f"pass's own steps")
    points, stopped = [], None
    step, started = first_step, time.monotonic()
    extended = False
    try:  # one step unread: the first after the pass's other phases allocates what they left to it
        settle()
        step_once()
        step += 1
    except Exception as err:  # noqa: BLE001 - as below
        return _found(list(prior), False, budgets_s, len(prior),
                      f"the phase's first step raised {type(err).__name__}: {str(err)[:200]}")
    while True:
        settle()
        points.append((step, int(read())))
        spent = time.monotonic() - started
        if not extended and (len(points) >= short or spent >= short_s):
            if not suspect(points):
                break
            per_step = spent / max(len(points) - 1, 1)
            if len(points) + long_s / max(per_step, 1e-9) < MIN_STEPS:
                stopped = (f"a step takes {per_step:.3g} s: the longer run's {long_s:.3g} s would not reach "
                           f"{MIN_STEPS} readings")
                break
            extended, started = True, time.monotonic()
            spent = 0.0
        if extended and (len(points) >= long or spent >= long_s):
            if len(points) < long:
                stopped = f"the longer run's {long_s:.3g} s of steps held {len(points)} of {long} readings"
            break
        try:
            step_once()
        except MemoryError:
            stopped = f"out of memory in step {step + 1} while measuring growth"
            break
        except Exception as err:  # noqa: BLE001 - the phase ends; the figures taken stand
            stopped = f"step {step + 1} raised {type(err).__name__}: {str(err)[:200]}"
            break
        step += 1
    if len(points) < MIN_STEPS and prior:  # too few of its own: with the pass's readings
        return _found(list(prior) + points, extended, budgets_s, len(prior), stopped)
    return _found(points, extended, budgets_s, 0, stopped)


def _found(points, extended, budgets_s, from_pass, stopped):
    found = judge(points)
    found.update(readings=len(points), from_pass=from_pass, extended=extended, steps=[s for s, _ in points],
                 samples=[b for _, b in points], budgets_s=[round(b, 3) for b in budgets_s],
                 method="own memory at each settled step's start (after gc + malloc_trim); Theil-Sen slope of each "
                        "half against the step, one-sided Mann-Kendall (harness/measure/leak.py)")
    if stopped:
        found["stopped"] = stopped
    return found
