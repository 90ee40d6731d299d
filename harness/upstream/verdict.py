"""Did the standalone script show the change the harness confirmed?

    reproduced standalone   the standalone medians move the way the side-by-side ones did,
                            by at least HALF of that move
    harness only            measured standalone, and it does not (the other way, or less
                            than half the size): the move is in gradmem's measurement, or
                            in something the script leaves out (docs/releases.md says which
                            was found)
    failed                  fewer than MIN_RUNS ok runs on a side (the runs' messages say why)
    unavailable             an environment could not be built (set by the caller)

The one-sided exact rank-sum p of the standalone samples (confirm.rank_sum_p) is given
beside it: with three runs a side, complete separation is p = 0.05, so the rule is the
size and direction, and p says how cleanly the runs separate.
"""

import statistics

from harness import figures
from harness.releases import confirm

#: the figures the probe measures (probe.py): a change of another (the framework's own
#: prediction, time) is not judged standalone
MEASURED = ("retained", "code_pages", "step_peak", "step_peak.forward", "step_peak.backward", "footprint",
            "first_step_retained", "first_step_peak", "first_step_peak.forward", "first_step_peak.backward",
            "first_step_footprint")
HALF = 0.5
MIN_RUNS = 2
RULE = (f"reproduced standalone: the standalone script's medians move the way the side-by-side ones did, by at "
        f"least {HALF:.0%} of that move (at least {MIN_RUNS} ok runs of each release, fresh processes, "
        f"interleaved); harness only: measured standalone, and they do not")


def values(samples, figure):
    """The ok runs' values of `figure`, in run order."""
    found = []
    for _, sample in sorted(samples.items()):
        value = (sample.get("figures") or {}).get(figure) if sample.get("status") == "ok" else None
        if isinstance(value, (int, float)):
            found.append(value)
    return found


def judge(change, by_release):
    """The standalone verdict on one confirmed change from its group's runs
    (`by_release`: {release: {index: sample}})."""
    figure = change["figure"]
    harness = change.get("confirmation") or {}
    a = values(by_release.get(change["before_release"], {}), figure)
    b = values(by_release.get(change["release"], {}), figure)
    failed = [s.get("message", "") for side in by_release.values() for s in side.values() if s.get("status") != "ok"]
    found = {"figure": figure, "before_samples": a, "after_samples": b,
             "harness": {k: harness.get(k) for k in ("before", "after", "delta", "relative", "p", "pairs")}}
    if len(a) < MIN_RUNS or len(b) < MIN_RUNS:
        why = (f"a figure the script does not measure ({figure}: {figures.get(figure).label})"
               if not a and not b and not failed else f"{min(len(a), len(b))} ok run(s) on a side; {MIN_RUNS} needed")
        return dict(found, status="failed", why=why, messages=failed[-3:])
    before, after = statistics.median(a), statistics.median(b)
    delta = after - before
    expected = harness.get("delta") or change["delta"]
    same_way = delta * expected > 0
    share = delta / expected if expected else None
    p = confirm.rank_sum_p(a, b) if expected > 0 else confirm.rank_sum_p([-v for v in a], [-v for v in b])
    reproduced = same_way and abs(delta) >= HALF * abs(expected)
    found.update(status="reproduced" if reproduced else "harness only", before=before, after=after, delta=delta,
                 relative=delta / before if before else None, share=share, p=round(p, 5))
    if not reproduced:
        found["why"] = ("moved the other way standalone" if delta * expected < 0 else
                        "no move standalone" if delta == 0 else
                        f"moved {share:.0%} of the harness's move standalone (at least {HALF:.0%} needed)")
    if failed:
        found["messages"] = failed[-3:]
    return found
