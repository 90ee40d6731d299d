"""Did the standalone script show the change the harness confirmed?

    reproduced standalone   the standalone medians move the way the side-by-side ones did,
                            by at least HALF of that move
    harness only            the script does not (the other way, or less than half the
                            size) while gradmem's own memory pass, run again beside it
                            (control.py), does: the move is in what the harness measures
                            and the script leaves out
    not reproduced here     neither the script nor gradmem's own pass, run today on this
                            machine, shows it: the store's confirmation (another machine,
                            environments built then) does not hold here; nothing tells
                            the two measurements apart
    failed                  fewer than MIN_RUNS ok runs on a side (the runs' messages say why)
    unavailable             an environment could not be built (set by the caller)

The one-sided exact rank-sum p of the standalone samples (confirm.rank_sum_p) is given
beside it: with three runs a side, complete separation is p = 0.05, so the rule is the
size and direction, and p says how cleanly the runs separate.
"""

import statistics

from harness import figures
from harness.releases import confirm, detect

#: the figures the probe measures (probe.py; `leak`, the growth per step, in the scripts
#: of a change of it): a change of another (the framework's own prediction, time) is not
#: judged standalone
MEASURED = ("retained", "code_pages", "step_peak", "step_peak.forward", "step_peak.backward", "footprint",
            "first_step_retained", "first_step_peak", "first_step_peak.forward", "first_step_peak.backward",
            "first_step_footprint", detect.GROWTH)
HALF = 0.5
MIN_RUNS = 2
RULE = (f"reproduced standalone: the standalone script's medians move the way the side-by-side ones did, by at "
        f"least {HALF:.0%} of that move (at least {MIN_RUNS} ok runs of each release, fresh processes, "
        f"interleaved); harness only: they do not, and gradmem's own memory pass run again beside them does; not "
        f"reproduced here: neither does")


def values(samples, figure):
    """The ok runs' values of `figure`, in run order."""
    found = []
    for _, sample in sorted(samples.items()):
        value = (sample.get("figures") or {}).get(figure) if sample.get("status") == "ok" else None
        if isinstance(value, (int, float)):
            found.append(value)
    return found


def too_few(a, b):
    """Why samples `a` and `b` cannot be judged (fewer than MIN_RUNS ok runs on a side), or ''."""
    if len(a) < MIN_RUNS or len(b) < MIN_RUNS:
        return f"{min(len(a), len(b))} ok run(s) on a side; {MIN_RUNS} needed"
    return ""


def moves(change, a, b):
    """(before, after, delta, share of the side-by-side move, p, holds) of samples `a` and
    `b` against the confirmed move of `change`: holds when it goes the same way by at
    least HALF of it."""
    expected = (change.get("confirmation") or {}).get("delta") or change["delta"]
    before, after = statistics.median(a), statistics.median(b)
    delta = after - before
    p = confirm.rank_sum_p(a, b) if expected > 0 else confirm.rank_sum_p([-v for v in a], [-v for v in b])
    share = delta / expected if expected else None
    return before, after, delta, share, round(p, 5), delta * expected > 0 and abs(delta) >= HALF * abs(expected)


def judge(change, by_release, control=None):
    """The standalone verdict on one confirmed change from its group's runs
    (`by_release`: {release: {index: sample}}); `control`: gradmem's own passes run
    beside them (control.py, same shape), where the script did not reproduce."""
    figure = change["figure"]
    harness = change.get("confirmation") or {}
    a = values(by_release.get(change["before_release"], {}), figure)
    b = values(by_release.get(change["release"], {}), figure)
    failed = [s.get("message", "") for side in by_release.values() for s in side.values() if s.get("status") != "ok"]
    found = {"figure": figure, "before_samples": a, "after_samples": b,
             "harness": {k: harness.get(k) for k in ("before", "after", "delta", "relative", "p", "pairs")}}
    if short := too_few(a, b):
        why = (f"a figure the script does not measure ({figure}: {figures.get(figure).label})"
               if not a and not b and not failed else short)
        return dict(found, status="failed", why=why, messages=failed[-3:])
    before, after, delta, share, p, reproduced = moves(change, a, b)
    found.update(status="reproduced" if reproduced else "harness only", before=before, after=after, delta=delta,
                 relative=detect.relative(figure, before, after), share=share, p=p)
    if not reproduced:
        found["why"] = ("no move standalone" if delta == 0 else "moved the other way standalone" if share < 0 else
                        f"moved {share:.0%} of the harness's move standalone (at least {HALF:.0%} needed)")
        ca = values((control or {}).get(change["before_release"], {}), figure)
        cb = values((control or {}).get(change["release"], {}), figure)
        if len(ca) >= MIN_RUNS and len(cb) >= MIN_RUNS:
            c_before, c_after, c_delta, c_share, c_p, c_holds = moves(change, ca, cb)
            found["control"] = {"before": c_before, "after": c_after, "delta": c_delta, "share": c_share, "p": c_p,
                                "before_samples": ca, "after_samples": cb}
            said = (f"gradmem's own pass today: {detect.number(figure, c_before)} -> "
                    f"{detect.fmt(figure, c_after)} ({c_share:.0%} of it)")
            found["why"] += f"; {said}"
            if not c_holds:
                found["status"] = "not reproduced here"
        elif control is not None:  # run, but too few of its passes measured
            found["control"] = {"failed": f"{min(len(ca), len(cb))} ok pass(es) on a side; {MIN_RUNS} needed"}
            found["why"] += f"; gradmem's own pass beside it failed ({found['control']['failed']})"
        else:
            found["why"] += "; gradmem's own pass not run again beside it"
    if failed:
        found["messages"] = failed[-3:]
    return found


def judge_form(change, by_release):
    """How the script in another form (inline.FORMS: each op a small function) moves for
    a change the inlined script left to the harness: {status: reproduced | not reproduced
    | failed, before, after, delta, share, p, before_samples, after_samples}, by the
    same rule."""
    a = values(by_release.get(change["before_release"], {}), change["figure"])
    b = values(by_release.get(change["release"], {}), change["figure"])
    if short := too_few(a, b):
        return {"status": "failed", "why": short, "before_samples": a, "after_samples": b}
    before, after, delta, share, p, holds = moves(change, a, b)
    return {"status": "reproduced" if holds else "not reproduced", "before": before, "after": after, "delta": delta,
            "share": share, "p": p, "before_samples": a, "after_samples": b}


#: how each of the loss's other forms (harness/upstream/inline.py, FORMS) is written, in words
FORM_WORDS = {"functions": "with each op a small function",
              "table": "as written, through an op table as gradmem calls it"}


def form_words(figure, form, held):
    """What the runs of the script in `form` say of a harness-only change, in a clause."""
    if held.get("before") is None:
        return f"the script {FORM_WORDS[form]}: {held['status']} ({held.get('why', '')})"
    moved = (f"{detect.number(figure, held['before'])} -> {detect.fmt(figure, held['after'])} "
             f"({held['share']:.0%} of it)")
    if held["status"] == "reproduced":
        return (f"{FORM_WORDS[form]} the script reproduces it ({moved}): the move is in how the framework takes "
                f"the loss written so")
    return f"{FORM_WORDS[form]} the script does not reproduce it either ({moved})"
