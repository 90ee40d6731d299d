"""A flagged change is listed as a change only when a side-by-side re-measure holds it.

The detector (detect.py) flags a change from the sweep's rounds: 2 or 3 per release,
each release measured after the other. A band of two samples is rough, and a machine
whose load drifts between one release's rounds and the next's moves every figure of
the later one: a third of the flagged changes were under 3x their band, and
TensorFlow's compiled chained_dot "change" at 2.18.0 came out the other way round
when the two releases were measured side by side.

So each flagged (workload, mode, release pair) is measured again in one run with its
two releases interleaved, A B A B ... (side_by_side.py: each sample a memory pass in a
fresh worker, as `harness run` measures), and each flagged figure of the pair is
judged on those samples alone:

    confirmed      the interleaved medians move the flagged way by more than the grain
                   (256 KiB for memory) AND the one-sided exact rank-sum test (Mann-Whitney,
                   ties as mid-ranks) of B's samples against A's gives p <= ALPHA (0.01):
                   with 5 pairs, at most one of the 25 A-B comparisons out of order
                   (complete separation is p = 1/252)
    not confirmed  measured, and it does not hold
    pending        not measured side by side yet (`harness releases --confirm`), or
                   measured in part: fewer than PAIRS pairs, every sample ok (a run
                   stopped part-way; the next run measures the rest)
    failed         fewer than MIN_SAMPLES ok samples on a side (the cells' messages say why)
    advisory       a figure that is never a memory change a user acts on (the registry's
                   `advisory`): time, measured on a shared machine; code pages, the
                   library pages the steps paged in (shared, reclaimable). Shown; a code
                   pages change of a pair measured side by side for another figure is
                   judged on those samples too (`side_by_side`), never measured for itself

A pair whose first PAIRS pairs leave a figure *undecided* (the flagged direction, p in
(ALPHA, UNDECIDED]) is measured on to MAX_PAIRS pairs in the same run: a noisy figure
gets more samples, a clear one is settled by five. (Looking twice raises the chance of
confirming a flat pair slightly above ALPHA: at most ALPHA at each look, 0.02 in all.)

A flagged change whose own pair is not measured side by side, but which is the only
flagged change of its series inside a wider pair confirmed side by side (`across`:
1.13.1 -> 2.0.1 was confirmed before 2.0.0 was swept, and the sweep now places the move
at 1.13.1 -> 2.0.0), is confirmed across that pair, saying so: the side-by-side run says
the move is real, the sweep's rounds where it lies. `--confirm` leaves such a change
alone. A wider pair *not* confirmed decides nothing for it (a move and an unflagged one
back inside could cancel), so it stays pending.

A confirmed change a user would act on (`actionable`): its side-by-side move is at
least ACT_RELATIVE (5 %) of the figure and at least ACT_BYTES (1 MiB), and not mostly
library code pages (a step peak whose pages paged in moved by at least half as much,
the same way: `mostly_code_pages`). The page and
docs/releases.md lead with those, one line each; the rest is folded.
"""

import math
import statistics

from harness import figures, origin
from harness.releases import detect, store
from harness.report.fmt import signed_percent
from harness.versions import index

ALPHA = 0.01
UNDECIDED = 0.1
PAIRS = 5
MAX_PAIRS = 10
MIN_SAMPLES = 3
ACT_RELATIVE = 0.05
ACT_BYTES = detect.MIB
#: the record keys of a side-by-side sample: the release pair it was measured for
#: ("before->after") and its pair's number (1..N)
PAIR_KEY = "confirm_pair"
INDEX_KEY = "confirm_index"
STATUSES = ("confirmed", "not confirmed", "pending", "failed", "advisory")

#: the figures with a size rule of their own (the registry's `act_bytes`), as the rule says it
OWN_SIZES = "".join(f" ({f.label}: {f.act_bytes // 1024} KiB)" for f in figures.listed(figures.DETECT) if f.act_bytes)
RULE = (f"a flagged change is confirmed when its two releases, measured again interleaved (A B A B ..., "
        f"{PAIRS} pairs, up to {MAX_PAIRS} where undecided, each a fresh worker), move the flagged way by more "
        f"than {detect.GRAIN_BYTES // 1024} KiB{detect.OWN_GRAINS} (median to median) and the one-sided exact "
        f"rank-sum test gives p <= {ALPHA}; actionable: confirmed and at least {ACT_RELATIVE:.0%} and "
        f"{ACT_BYTES // detect.MIB} MiB side by side{OWN_SIZES}, and not mostly library code pages")


def pair_label(before, after):
    return f"{before}->{after}"


def group_key(change):
    """The cells one side-by-side run measures for `change` (a changes.json entry)."""
    return change["workload"], change["mode"], change["before_release"], change["release"]


def large(change):
    """The sweep's flagged move passes the size rule (what --confirm-scope large measures)."""
    return _passes_size(change["figure"], change["before"], change["delta"])


def _passes_size(figure, before, delta):
    if detect.FIGURES[figure] != "bytes":
        return False
    own = figures.get(figure).act_bytes  # a figure with a size rule of its own (growth per step): that alone
    if own:
        return abs(delta) >= own
    return abs(delta) >= ACT_BYTES and bool(before) and abs(delta) / abs(before) >= ACT_RELATIVE


def midranks_doubled(values):
    """2 x the mid-rank of each value (integers: ties share the mean of their ranks)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = i + j + 2  # 2 x mean of the 1-based ranks i+1..j+1
        i = j + 1
    return ranks


def rank_sum_p(a, b):
    """P(B's rank sum >= the observed one) when every split of the pooled samples into
    len(a) and len(b) is equally likely (no change): the exact one-sided Mann-Whitney
    test that B lies above A, ties as mid-ranks (counted over the splits, so exact)."""
    ranks = midranks_doubled(list(a) + list(b))
    observed = sum(ranks[len(a):])
    k = len(b)
    counts = [dict() for _ in range(k + 1)]  # counts[j][s]: splits of j ranks summing to s
    counts[0][0] = 1
    for rank in ranks:
        for j in range(k, 0, -1):
            for total, n in counts[j - 1].items():
                counts[j][total + rank] = counts[j].get(total + rank, 0) + n
    return sum(n for total, n in counts[k].items() if total >= observed) / math.comb(len(ranks), k)


def judge(a, b, figure, direction):
    """The verdict on one flagged figure from its side-by-side samples `a` (before) and
    `b` (after): {"status", "p", "before", "after", "delta", ...}."""
    a, b = [v for v in a if v is not None], [v for v in b if v is not None]
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return {"status": "failed", "before_samples": a, "after_samples": b,
                "why": f"{min(len(a), len(b))} ok sample(s) on a side; {MIN_SAMPLES} needed"}
    before, after = statistics.median(a), statistics.median(b)
    delta = after - before
    floor = detect.grain(figure)
    # the one-sided test in the flagged direction: a move the other way is never confirmed
    p = rank_sum_p(a, b) if direction == "up" else rank_sum_p([-v for v in a], [-v for v in b])
    same_way = delta > 0 if direction == "up" else delta < 0
    holds = same_way and abs(delta) > floor and p <= ALPHA
    verdict = {
        "status": "confirmed" if holds else "not confirmed",
        "before": before, "after": after, "delta": delta,
        "relative": detect.relative(figure, before, after),
        "p": round(p, 5), "pairs": min(len(a), len(b)),
        "before_samples": a, "after_samples": b,
    }
    if not holds:
        verdict["why"] = ("moved the other way side by side" if not same_way and delta != 0 else
                          "no move side by side" if delta == 0 else
                          f"moved {_within(figure, abs(delta))}, within the grain" if abs(delta) <= floor else
                          f"the samples overlap (p = {p:.3f} > {ALPHA})")
    return verdict


def _within(figure, moved):
    """A move within the grain, finer than the detector's figures (a tenth of the grain)."""
    return detect.fmt(figure, moved) if detect.grain(figure) < detect.GRAIN_BYTES else f"{moved / detect.MIB:.3f} MiB"


def undecided(verdict):
    """Worth more pairs: the flagged direction, beyond the grain, but p not small enough yet."""
    return (verdict["status"] == "not confirmed" and "p" in verdict
            and verdict["why"].startswith("the samples overlap") and verdict["p"] <= UNDECIDED)


def samples(records, key):
    """{release: [(index, record)]} of the side-by-side records measured for `key`
    (group_key), in pair order."""
    workload, mode, before, after = key
    label = pair_label(before, after)
    held = {before: {}, after: {}}
    for record in records:
        if (record.get(PAIR_KEY) == label and record.get("workload") == workload and record.get("mode") == mode
                and detect.release_of(record) in held):
            # the newest sample of an index stands, except that an `unavailable` one (the
            # release could not be installed then) never replaces a measured one
            mine = held[detect.release_of(record)]
            index = record.get(INDEX_KEY) or 0
            if index not in mine or record.get("status") != "unavailable":
                mine[index] = record
    return {release: sorted(mine.items(), key=lambda item: item[0]) for release, mine in held.items()}


def predates(record, figure):
    """True for an ok sample of a memory pass without the leak phase (measured by a gradmem
    before it existed, for another figure of its pair), judged for the growth per step:
    not a sample of that figure, to be measured again (side_by_side.py), never a
    failure."""
    return figure == detect.GROWTH and record.get("status", "ok") == "ok" and figures.leak_verdict(record) is None


def verdict_of(change, records):
    """The confirmation of one changes.json entry from the side-by-side `records`."""
    if change["advisory"]:
        return advisory_verdict(change, records)
    held = samples(records, group_key(change))
    a_records, b_records = [[r for _, r in held[release] if not predates(r, change["figure"])]
                            for release in (change["before_release"], change["release"])]
    if not a_records and not b_records:
        return {"status": "pending", "why": "not measured side by side yet (harness releases --confirm)"}
    a = [detect.value(r, change["figure"]) for r in a_records]
    b = [detect.value(r, change["figure"]) for r in b_records]
    failed = [r.get("message", "")[:200] for r in a_records + b_records if r.get("status") != "ok"]
    complete = min(len(a_records), len(b_records))
    if complete < PAIRS and not failed:
        # a run stopped part-way, not a verdict: fewer than PAIRS pairs can never reach
        # ALPHA (4 against 4 at best p = 1/70), so judging them would call it "not confirmed"
        return {"status": "pending", "pairs": complete,
                "why": f"measured in part: {complete} of {PAIRS} pairs (a stopped run); harness releases --confirm "
                       f"measures the rest"}
    verdict = judge(a, b, change["figure"], change["direction"])
    code = detect.code_moved(None, change, a_records, b_records) if verdict["status"] == "confirmed" else None
    if code is not None:  # the library pages inside the move, side by side
        verdict["code_pages_delta"] = code["delta"]
        if code["estimated"]:
            verdict["code_pages_estimated"] = True
    if failed:
        verdict["not_ok"] = failed
    # the side-by-side run measures with today's gradmem: at one release its figure may
    # differ from the sweep's by what changed in the harness since (the commits say)
    commits = sorted({(r.get("provenance") or {}).get("git_commit") or "?" for r in a_records + b_records})
    verdict["gradmem"] = [c[:12] + ("+dirty" if c.endswith("+dirty") else "") for c in commits]
    # a group stopped part-way and finished on another machine (a new box, another kernel
    # build) pools pairs measured apart: each pair is still side by side, but a reader
    # should know its samples are not all of one machine
    machines = sorted({origin.measured_on(r) for r in a_records + b_records} - {None})
    if len(machines) > 1:
        verdict["machines"] = machines
    when = [(r.get("provenance") or {}).get("finished_at") for r in a_records + b_records]
    when = [w for w in when if w]
    if when:
        verdict["measured"] = [min(when), max(when)]
    return verdict


def advisory_verdict(change, records):
    """A change never confirmed as a memory change (time, code pages: the registry says
    why). A figure of bytes whose release pair the store measured side by side for
    another figure's sake is judged on those samples too, for the reader
    (``side_by_side``); nothing is measured for it."""
    figure = change.get("figure")
    why = (figures.get(figure).advisory if figure else "") or "advisory"
    verdict = {"status": "advisory", "why": f"{why}: shown, never an actionable memory change"}
    if not figure or detect.FIGURES.get(figure) != "bytes":
        return verdict
    held = samples(records, group_key(change))
    a_records, b_records = [r for _, r in held[change["before_release"]]], [r for _, r in held[change["release"]]]
    if a_records and b_records:
        a = [detect.value(r, change["figure"]) for r in a_records]
        b = [detect.value(r, change["figure"]) for r in b_records]
        if min(len([v for v in a if v is not None]), len([v for v in b if v is not None])) >= MIN_SAMPLES:
            verdict["side_by_side"] = judge(a, b, change["figure"], change["direction"])
    return verdict


def across(change, records, changes):
    """The confirmed verdict of the narrowest wider release pair measured side by side
    that holds `change`'s pair and no other flagged change of its series (workload, mode,
    figure), with "across": [before, after] of that pair; None where there is none."""
    lo, hi = index.parse(change["before_release"]), index.parse(change["release"])
    labels = {r[PAIR_KEY] for r in records
              if r.get(PAIR_KEY) and r.get("workload") == change["workload"] and r.get("mode") == change["mode"]}
    wider = []
    for label in labels:
        before, _, after = label.partition("->")
        a, b = index.parse(before), index.parse(after)
        if a <= lo and b >= hi and (a, b) != (lo, hi):
            wider.append((b, a, before, after))
    for _, _, before, after in sorted(wider, key=lambda w: (w[0], [-x for x in w[1].release])):
        inside = [c for c in changes if not c["advisory"] and (c["workload"], c["mode"], c["figure"])
                  == (change["workload"], change["mode"], change["figure"])
                  and index.parse(c["before_release"]) >= index.parse(before)
                  and index.parse(c["release"]) <= index.parse(after)]
        if inside != [change]:
            continue  # another flagged move of the series inside: the wider pair cannot tell them apart
        verdict = verdict_of(dict(change, before_release=before, release=after), records)
        if verdict["status"] == "confirmed":
            return dict(verdict, across=[before, after])
    return None


def across_note(found):
    """' across A -> C (a wider pair ...)' for a verdict taken from a wider pair, else ''."""
    if not found.get("across"):
        return ""
    before, after = found["across"]
    return f" across {before} -> {after} (a wider pair, measured before the releases between were swept)"


def machines_note(found):
    """'its pairs from N machines: A, B' for a verdict whose samples came from more than
    one machine (verdict_of), else ''."""
    if not found.get("machines"):
        return ""
    return f"its pairs from {len(found['machines'])} machines: {', '.join(found['machines'])}"


def machines_suffix(found):
    """machines_note in parentheses after a verdict's figures (' (its pairs from ...)'),
    else '': how a line or a table cell says it (the page gives it a line of its own)."""
    note = machines_note(found)
    return f" ({note})" if note else ""


def actionable(change):
    """A confirmed change a user would act on: the size rule on the side-by-side figures,
    and a move that is not mostly library code pages (`mostly_code_pages`)."""
    found = change.get("confirmation") or {}
    return (found.get("status") == "confirmed" and _passes_size(change["figure"], found["before"], found["delta"])
            and not mostly_code_pages(found))


def why_not_actionable(change):
    """None for an actionable change; else why a user would not act on it, in words (a
    draft written while it was actionable says this once the store judges it again)."""
    if change.get("actionable"):
        return None
    found = change.get("confirmation") or {}
    status = found.get("status", "pending")
    if status == "confirmed":
        if mostly_code_pages(found):
            return "confirmed side by side, but mostly library code pages paged in, not memory the framework keeps"
        size = figures.get(change["figure"]).act_bytes
        rule = f"{size // 1024} KiB" if size else f"{ACT_RELATIVE:.0%} and {ACT_BYTES // detect.MIB} MiB"
        return f"confirmed side by side, but under the size rule (at least {rule})"
    return status + (f": {found['why']}" if found.get("why") else "")


def mostly_code_pages(found):
    """True when at least half of a confirmed move (`found`: its verdict) is the library
    code pages the figure holds (a step peak's pages paged in: `code_pages_delta`,
    estimated from the steady code pages for a first step measured before its own were
    kept: `code_pages_estimated`), the same way: the step's own memory did not move that much."""
    code, delta = found.get("code_pages_delta"), found.get("delta")
    return bool(code is not None and delta and code * delta > 0 and abs(code) >= abs(delta) / 2)


def attach(document, records, withdrawn=()):
    """Each change of `document` (detect.report) with its "confirmation" from the
    side-by-side `records`, and the document's tally per figure. A change whose pair had
    samples withdrawn (`withdrawn`: FRAMEWORK.confirm.withdrawn.jsonl's records) says so
    in its confirmation's "measured_again": how many, why, when."""
    again = measured_again(withdrawn)
    for change in document["changes"]:
        change["confirmation"] = verdict_of(change, records)
        if change["confirmation"]["status"] == "pending" and "pairs" not in change["confirmation"]:
            change["confirmation"] = across(change, records, document["changes"]) or change["confirmation"]
        if group_key(change) in again and "pairs" in change["confirmation"]:
            change["confirmation"]["measured_again"] = again[group_key(change)]
    for change in document["changes"]:
        change["actionable"] = actionable(change)
    document["confirmation_rule"] = RULE
    document["tally"] = tally(document["changes"])
    return document


def measured_again(withdrawn):
    """{group key: {"withdrawn": n, "reason", "at"}} of the withdrawn samples (the latest
    withdrawal's reason and time where a pair was measured again more than once)."""
    def pair_key(record):
        before, arrow, after = str(record.get(PAIR_KEY) or "").partition("->")
        return (record.get("workload"), record.get("mode"), before, after) if arrow else None

    return store.measured_again(withdrawn, pair_key)


def withdrawn_words(again, what="samples"):
    """'N earlier samples withdrawn: REASON' of a confirmation's "measured_again" (the
    page's line and the report draft say it alike; `what`: "records" for a release swept
    again, store.measured_again)."""
    return f"{again['withdrawn']} earlier {what} withdrawn: {again['reason']}"


def again_words(again, what="samples"):
    """'; measured again DATE (N earlier samples withdrawn: REASON)' of a "measured_again"
    entry (a pair's, or with what="records" a release's, store.measured_again), else ''."""
    if not again:
        return ""
    return f"; measured again {again['at'][:10]} ({withdrawn_words(again, what)})"


def again_note(found):
    """again_words of a change whose pair was measured anew, else ''."""
    return again_words(found.get("measured_again"))


def tally(changes):
    """{figure: {status: count, "flagged": n, "actionable": n}} and "all"."""
    out = {}
    for change in changes:
        status = (change.get("confirmation") or {}).get("status", "pending")
        for figure in (change["figure"], "all"):
            row = out.setdefault(figure, {"flagged": 0, **{s: 0 for s in STATUSES}, "actionable": 0})
            row["flagged"] += 1
            row[status] += 1
            row["actionable"] += bool(change.get("actionable"))
    return out


def by_status(changes):
    """The changes split for readers: actionable first, then the other confirmed ones,
    not confirmed, pending, failed, advisory (each in the detector's order)."""
    groups = {"actionable": [], "confirmed": [], "not confirmed": [], "pending": [], "failed": [], "advisory": []}
    for change in changes:
        status = (change.get("confirmation") or {}).get("status", "pending")
        groups["actionable" if change.get("actionable") else status].append(change)
    return groups


def line(change):
    """One line for a reader: the series, the release, both runs' figures."""
    figure, found = change["figure"], change.get("confirmation") or {}
    sweep = (f"sweep {detect.fmt(figure, change['before'])} -> {detect.fmt(figure, change['after'])} "
             f"({len(change['before_samples'])}+{len(change['after_samples'])} rounds)")
    if "before" in found:
        rel = f" ({signed_percent(found['relative'])})" if found.get("relative") is not None else ""
        note = across_note(found)
        side = (f"side by side{note}{':' if note else ''} {detect.fmt(figure, found['before'])} -> "
                f"{detect.fmt(figure, found['after'])}{rel}, {found['pairs']} pairs, p = {found['p']:.3g}"
                f"{machines_suffix(found)}{again_note(found)}")
    else:
        side = found.get("why", "not measured side by side")
    deps = change.get("dependencies_differ") or {}
    differ = ("; " + ", ".join(f"{d} {a} -> {b}" for d, (a, b) in deps.items()) + " differ") if deps else ""
    return (f"{change['workload']} {change['mode']} {figure}: {change['before_release']} -> {change['release']}"
            f"{detect.growth_note(change)}: {side}{code_note(found)}; {sweep}{differ}")


def code_note(found):
    """'; of which ... code pages' for a confirmed move mostly of library code pages, else ''."""
    if not mostly_code_pages(found):
        return ""
    how = ", estimated from the steady code pages" if found.get("code_pages_estimated") else ""
    return (f"; of which {found['code_pages_delta'] / detect.MIB:+.2f} MiB library code pages paged in{how}: "
            f"not the framework's own memory, not actionable")


def summary(document):
    """Lines for the terminal: flagged vs confirmed per figure, then the actionable changes."""
    lines = []
    order = list(detect.FIGURES) + ["all"]
    for figure, row in sorted(document.get("tally", {}).items(), key=lambda item: order.index(item[0])):
        lines.append(f"{figure}: flagged {row['flagged']}, confirmed {row['confirmed']} ({row['actionable']} "
                     f"actionable), not confirmed {row['not confirmed']}, pending {row['pending']}"
                     + (f", failed {row['failed']}" if row["failed"] else "")
                     + (f", advisory {row['advisory']}" if row["advisory"] else ""))
    lines += [f"actionable: {text}" for text, _ in lead_lines(by_status(document["changes"])["actionable"])]
    return "\n".join(lines)


def lead_lines(changes, also="also moved"):
    """One line per (workload, mode, release pair) of `changes`: its first figure in the
    page's order with both runs' figures, the other figures that moved with it named
    with their side-by-side moves ([(line, the change the line leads with)])."""
    groups = {}
    for change in changes:
        groups.setdefault(group_key(change), []).append(change)
    order = list(detect.FIGURES)
    label = also
    out = []
    for members in groups.values():
        members = sorted(members, key=lambda c: order.index(c["figure"]))
        first, rest = members[0], members[1:]
        others = ", ".join(f"{c['figure']} {_move(c)}" for c in rest)
        out.append((line(first) + (f"; {label}: {others}" if others else ""), first))
    return out


def _move(change):
    found = change.get("confirmation") or {}
    delta = found.get("delta", change["delta"])
    if detect.FIGURES[change["figure"]] != "bytes":
        return f"{delta:+.4f} s"
    return ("+" if delta >= 0 else "-") + detect.fmt(change["figure"], abs(delta))
