"""Every actionable change of a store, cheapest first, resumable.

The groups (ids.py) with at least one actionable change, each measured once. The order
is greedy by cost: the next group is the one that costs least given the environments
at hand (built ones are free; a missing one costs its build, from the store's
FRAMEWORK.envs.json where it says, else DEFAULT_BUILD_S), plus its runs at the pace of
its side-by-side samples (each sample's memory-pass wall, from FRAMEWORK.confirm.jsonl):
so the groups whose releases are built run first, and a release built for one group
serves the others next. A group already judged for its current script is skipped
(`done`): a stopped batch goes on where it stopped, and a script changed since (a probe
fixed) is measured again.
"""

import statistics

from harness.releases import confirm
from harness.upstream import ids

DEFAULT_BUILD_S = 300.0
DEFAULT_SAMPLE_S = 60.0


def groups(document):
    """[representative change] of each group holding an actionable change, in store order."""
    from harness.upstream import verdict

    seen, found = set(), []
    for change in document.get("changes") or []:
        key = confirm.group_key(change)
        if change.get("actionable") and change["figure"] in verdict.MEASURED and key not in seen:
            seen.add(key)
            found.append(change)
    return found


def held_not_actionable(document, outcomes, framework):
    """[representative change] of each group run standalone before (in `outcomes`) that
    holds no actionable change now: the change its draft led with (an outcome marked
    actionable when it ran, the draft's order of figures), so its draft can be written
    again saying so. A group the sweep no longer flags at all is left out (nothing to
    write it from: `no_longer_flagged` lists those)."""
    from harness.upstream import report_change, verdict

    standing = {confirm.group_key(c) for c in groups(document)}
    by_id = {ids.of(framework, c): c for c in document.get("changes") or []}
    found = []
    for group_id in outcomes.get("groups") or {}:
        mine = [(by_id.get(change_id), outcome) for change_id, outcome in (outcomes.get("changes") or {}).items()
                if outcome.get("group") == group_id]
        led = [c for c, outcome in mine if c is not None and outcome.get("actionable")]
        kept = [c for c, _ in mine if c is not None and c["figure"] in verdict.MEASURED]
        if not (led or kept) or confirm.group_key((led or kept)[0]) in standing:
            continue
        found.append(report_change.draft_lead(led or kept))
    return found


def no_longer_flagged(document, outcomes, framework):
    """[group id] of the groups run standalone before of which the sweep flags no memory
    change now (measured again, it moved within its band): nothing to write their drafts
    from again, so `report_change.mark_withdrawn` marks them as they are."""
    from harness.upstream import verdict

    flagged = {ids.group_of(framework, confirm.group_key(c)) for c in document.get("changes") or []
               if c["figure"] in verdict.MEASURED}
    return [group_id for group_id in outcomes.get("groups") or {} if group_id not in flagged]


def sample_walls(confirm_records):
    """{group key: median wall of its side-by-side memory passes, s}."""
    walls = {}
    for record in confirm_records:
        wall = ((record.get("provenance") or {}).get("worker_wall_s") or {}).get("memory")
        pair = record.get(confirm.PAIR_KEY)
        if isinstance(wall, (int, float)) and pair:
            before, _, after = pair.partition("->")
            walls.setdefault((record["workload"], record["mode"], before, after), []).append(wall)
    return {key: statistics.median(values) for key, values in walls.items()}


def order(changes, env_info, walls, built, runs):
    """`changes` (one per group) in the greedy cheapest-first order; `built(release)` says
    whether a release's environment is at hand now."""
    left, at_hand, ordered = list(changes), {r for c in changes for r in confirm.group_key(c)[2:] if built(r)}, []

    def cost(change):
        key = confirm.group_key(change)
        build = sum(float((env_info.get(r) or {}).get("build_s") or DEFAULT_BUILD_S)
                    for r in key[2:] if r not in at_hand)
        return build + 2 * runs * walls.get(key, DEFAULT_SAMPLE_S)

    while left:
        best = min(left, key=lambda c: (cost(c), ids.group_of("", confirm.group_key(c))))
        left.remove(best)
        ordered.append(best)
        at_hand.update(confirm.group_key(best)[2:])
    return ordered


def estimated_s(change, env_info, walls, at_hand, runs):
    key = confirm.group_key(change)
    build = sum(float((env_info.get(r) or {}).get("build_s") or DEFAULT_BUILD_S) for r in key[2:] if r not in at_hand)
    return build + 2 * runs * walls.get(key, DEFAULT_SAMPLE_S)


def done(outcomes, framework, document, change, sha, with_control=True, with_forms=True, form_sha=None):
    """True when every confirmed change of the group has a verdict for the script `sha`
    (failed and unavailable ones too: --retry measures those again), and, `with_control`,
    every one the script did not reproduce has gradmem's own pass beside it and,
    `with_forms`, the script in its other form's verdict (report_change.judge_forms), of
    that form's script as written now (`form_sha(form)`, where given)."""
    from harness.upstream import inline, report_change, store, verdict

    members = [c for c in ids.group_members(document, change)
               if (c.get("confirmation") or {}).get("status") == "confirmed" and c["figure"] in verdict.MEASURED]
    found = [outcomes.get("changes", {}).get(ids.of(framework, c)) for c in members]
    return bool(found) and all(f and f.get("script_sha") == sha and not (
        with_control and f.get("status") == "harness only" and "control" not in f) and not (
        with_forms and f.get("status") == "harness only" and report_change.forms_due(c)
        and not store.forms_judged(f, inline.FORMS[1:], form_sha))
        for c, f in zip(members, found))
