"""Bisection over an ordered list of candidates (releases, or commits), any measure.

`candidates[0]` is known good, `candidates[-1]` known bad. Both ends are measured
first: when they differ by no more than `threshold` (relative to good) there is nothing
to find. Otherwise a candidate is *bad* when its figure moved from good's by more than
the threshold in the direction bad moved, and the usual halving finds the first bad one.
A candidate that cannot be measured (an install that fails) is skipped, as
``git bisect skip`` does: the answer may then be a range. The two candidates at the
boundary are measured once more at the end; when the second figures do not tell them
apart the same way, the result says it is not confirmed.

Memory is near-deterministic (RSS grain ~0.25 MiB on these workloads), so one
measurement per probe is enough; the threshold must stay well above the grain.
"""

from dataclasses import dataclass, field


@dataclass
class Probe:
    candidate: str
    figure: float = None  # None: could not be measured
    message: str = ""
    verdict: str = ""  # "good", "bad", "skipped", or "" (an end, or a re-measurement)
    again: bool = False  # the boundary's second measurement


@dataclass
class Result:
    kind: str  # "culprit", "no_difference", "range" (skipped candidates hide the step), "end_failed"
    good_figure: float = None
    bad_figure: float = None
    first_bad: str = None
    last_good: str = None
    suspects: list = field(default_factory=list)  # the candidates a "range" leaves
    probes: list = field(default_factory=list)
    confirmed: bool = None
    message: str = ""

    @property
    def change(self):
        if not self.good_figure:
            return None
        return (self.bad_figure - self.good_figure) / self.good_figure


def bisect(candidates, measure, threshold, report=None):
    """`measure(candidate) -> (figure or None, message)`; `report(probe)` sees each probe
    as it is made. A Result."""
    if len(candidates) < 2:
        raise ValueError("bisect needs a good and a bad candidate")
    report = report or (lambda probe: None)
    probes = []

    def probe(index, again=False):
        figure, message = measure(candidates[index])
        made = Probe(candidates[index], figure, message, again=again)
        probes.append(made)
        return made

    good, bad = probe(0), probe(len(candidates) - 1)
    report(good)
    report(bad)
    result = Result("culprit", good.figure, bad.figure, probes=probes)
    failed = [p for p in (good, bad) if p.figure is None]
    if failed:
        result.kind = "end_failed"
        result.message = "; ".join(f"{p.candidate} could not be measured: {p.message}" for p in failed)
        return result
    direction = bad.figure - good.figure
    if good.figure == 0 or abs(direction) <= threshold * abs(good.figure):
        result.kind = "no_difference"
        return result

    def is_bad(figure):
        moved = figure - good.figure
        return moved * direction > 0 and abs(moved) > threshold * abs(good.figure)

    lo, hi = 0, len(candidates) - 1
    skipped = set()
    while True:
        inside = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inside:
            break
        middle = (lo + hi) / 2
        index = min(inside, key=lambda i: (abs(i - middle), i))
        made = probe(index)
        if made.figure is None:
            made.verdict = "skipped"
            skipped.add(index)
        elif is_bad(made.figure):
            made.verdict, hi = "bad", index
        else:
            made.verdict, lo = "good", index
        report(made)
    result.last_good, result.first_bad = candidates[lo], candidates[hi]
    if hi - lo > 1:
        result.kind = "range"
        result.suspects = candidates[lo + 1 : hi + 1]
        return result
    # the boundary once more: a flake would not repeat itself
    last_good, first_bad = probe(lo, again=True), probe(hi, again=True)
    report(last_good)
    report(first_bad)
    result.confirmed = (
        last_good.figure is not None
        and first_bad.figure is not None
        and not is_bad(last_good.figure)
        and is_bad(first_bad.figure)
    )
    return result
