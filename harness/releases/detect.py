"""Changes between consecutive releases, judged against each cell's measured run-to-run band.

A release sweep measures every release in N rounds (fresh processes each). For one
(workload, mode, figure) the samples of release A and of the next release B are
compared. Their *band* is the larger of the two releases' own spreads (max - min of
their rounds: what the same release does run to run, measured, not assumed), and at
least the instrument's grain for memory (`GRAIN_BYTES`: RSS is read in pages and
steps of ~256 KiB, docs/measurement.md; a spread of 0 over three rounds does not make
a 4 KiB move real). B changed when

    |median(B) - median(A)| > band   and   B's samples all lie beyond A's (no overlap)

Not a fixed percentage: a noisy cell (JAX's eager step peak moves ~10 % run to run)
needs a larger move than a deterministic one (autograd's is steady within the grain).
With fewer than 2 rounds on either side the band is not measured and nothing is
judged (`unjudged` counts such pairs). Time is advisory (a shared machine's load
moves it): its changes are listed apart and never called a regression of memory.
"""

import statistics
from typing import NamedTuple

from harness import figures, frameworks
from harness.releases import store
from harness.versions import index
from harness.units import MIB

GRAIN_BYTES = 256 * 1024

#: figure name -> unit, the order the page lists them in: the registry's figures the
#: detector lists (harness/figures.py, DETECT). "predicted" is the framework's own
#: prediction of the step (harness/measure/prediction.py): beside the measured figures it
#: tells a plan that changed from a runtime that changed
FIGURES = {figure.name: figure.unit for figure in figures.listed(figures.DETECT)}
MEANING = {figure.name: f"{figure.label}: {figure.meaning}" for figure in figures.listed(figures.DETECT)}
#: the figures with a grain of their own (the registry's `grain`), as the rules say it
OWN_GRAINS = "".join(f" ({f.label}: {f.grain // 1024} KiB)" for f in figures.listed(figures.DETECT) if f.grain)
#: the growth per step, the one figure read from a store's leak-only pass (leak_pass.py:
#: its records' other figures were measured by a newer gradmem than the sweep's); each
#: record's verdict (figures.leak_verdict) says whether the cell grows
GROWTH = "leak"
#: (short, long) seconds of the leak phase's extra steps where a store measures the growth
#: for itself (leak_pass.py, and side_by_side.py where it is flagged). The sweep's phase
#: gets a share of its pass (at most 4 and 12 s: harness/measure/leak.py budgets, the
#: default sweep's cost rule); a release store's cells at `small` take seconds a step
#: (autograd's chained_dot 0.8-7 s in its sweep), where those budgets read 1-2 steps of
#: the phase's own and leave the verdict inconclusive: 8 and 24 readings (leak.SHORT,
#: leak.LONG) need this much at 2-5 s a step
GROWTH_BUDGETS_S = (30.0, 120.0)


def relative(figure, before, after):
    """The move as a share of `before`, or None where a share means nothing: a base at or
    below zero, and the growth per step, whose flat base is zero give or take a page
    (0.4 KiB -> 35.6 KiB a step is not "+8,800 %": it starts growing)."""
    if figure == GROWTH or before is None or before <= 0:
        return None
    return (after - before) / before


class Change(NamedTuple):
    workload: str
    mode: str
    figure: str
    before_release: str  # the last release before the move
    release: str  # the release that introduced it
    before: float  # medians
    after: float
    band: float  # the run-to-run band it exceeded
    before_samples: tuple
    after_samples: tuple
    # releases the sweep measured between the two (other workloads or modes) where this
    # series has no record: the move happened somewhere in them or at `release`
    unmeasured_between: tuple = ()

    @property
    def delta(self):
        return self.after - self.before

    @property
    def relative(self):
        return relative(self.figure, self.before, self.after)

    @property
    def direction(self):
        return "up" if self.delta > 0 else "down"

    @property
    def worse(self):
        """The move goes the way the registry calls worse (`Figure.better`)."""
        return (self.delta > 0) == (figures.get(self.figure).better == "lower")

    @property
    def advisory(self):
        """Never an actionable memory change (time, code pages: the registry says why)."""
        return bool(figures.get(self.figure).advisory)


def value(record, figure):
    """The figure of an "ok" record (as a float), or None."""
    found = figures.value(record, figure)
    return None if found is None else float(found)


def release_of(record):
    """The release a record measured (its pinned version, else the version it ran)."""
    return record.get("version") or record.get("framework_version")


def series(records, leak=()):
    """{(workload, mode, figure): {release: [samples]}} of the ok records, and the growth
    per step alone of the leak-only pass's records `leak`."""
    out = {}
    for record, read in [(r, FIGURES) for r in records] + [(r, (GROWTH,)) for r in leak]:
        release = release_of(record)
        if release is None:
            continue
        for figure in read:
            found = value(record, figure)
            if found is not None:
                out.setdefault((record["workload"], record["mode"], figure), {}).setdefault(release, []).append(found)
    return out


def band(a, b, figure):
    """The run-to-run band of two releases' samples (None: fewer than 2 on a side)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return max(max(a) - min(a), max(b) - min(b), grain(figure))


def grain(figure):
    """The smallest move of `figure` that is not the instrument's grain (GRAIN_BYTES for
    memory unless the registry gives the figure its own: growth per step; 0 for time)."""
    if FIGURES[figure] != "bytes":
        return 0.0
    return figures.get(figure).grain or GRAIN_BYTES


def is_change(a, b, figure):
    """(changed, band) of release samples `a` then `b`."""
    width = band(a, b, figure)
    if width is None:
        return False, None
    delta = statistics.median(b) - statistics.median(a)
    apart = min(b) > max(a) if delta > 0 else max(b) < min(a)
    return abs(delta) > width and apart, width


class Found(NamedTuple):
    changes: list  # [Change]
    flat: list  # [(workload, mode, figure, releases compared, largest |delta| / band)]
    unjudged: int  # consecutive pairs with fewer than 2 rounds on a side


def detect(records, leak=()):
    """The changes of the store's `records` (and of the growth per step of its leak-only
    pass's records `leak`)."""
    changes, flat, unjudged = [], [], 0
    measured = sorted({release_of(r) for r in list(records) + list(leak)} - {None}, key=index.sort_key)
    for (workload, mode, figure), by_release in sorted(series(records, leak).items()):
        releases = sorted(by_release, key=index.sort_key)
        largest, judged = 0.0, 0
        for before, after in zip(releases, releases[1:]):
            a, b = by_release[before], by_release[after]
            changed, width = is_change(a, b, figure)
            if width is None:
                unjudged += 1
                continue
            judged += 1
            if changed:
                between = tuple(measured[measured.index(before) + 1:measured.index(after)])
                changes.append(Change(workload, mode, figure, before, after, statistics.median(a),
                                      statistics.median(b), width, tuple(a), tuple(b), between))
            else:
                ratio = abs(statistics.median(b) - statistics.median(a)) / width if width else 0.0
                largest = max(largest, ratio)
        if judged and not any(c[:3] == (workload, mode, figure) for c in changes):
            flat.append((workload, mode, figure, len(releases), largest))
    return Found(changes, flat, unjudged)


def parts(records, change):
    """What moved inside a memory change: {"phase": {forward/backward: delta}, "breakdown":
    {part: delta}, "moved": the largest part's name} (medians over the rounds)."""
    if change.advisory:
        return {}

    def medians(release):
        mine = [r for r in records if r.get("status") == "ok" and r.get("workload") == change.workload
                and r.get("mode") == change.mode and release_of(r) == release]
        out = {}
        found = {"phase": [figures.phases(r, "step_peak") for r in mine],
                 "breakdown": [r.get("breakdown_bytes") or {} for r in mine],
                 "retained": [r.get("retained_detail_bytes") or {} for r in mine]}
        for group, parts_ in found.items():
            for name in {n for part in parts_ for n in part}:
                values = [p[name] for p in parts_ if isinstance(p.get(name), (int, float))]
                if values:
                    out[(group, name)] = statistics.median(values)
        return out

    a, b = medians(change.before_release), medians(change.release)
    found = {}
    for (group, name) in sorted(set(a) & set(b)):
        if group == "phase" and name == "total":
            continue
        found.setdefault(group, {})[name] = b[(group, name)] - a[(group, name)]
    # the library pages inside the move (a figure that holds them: the step peaks, the footprints)
    code = code_moved(records, change)
    if code is not None:
        found["code_pages"] = code
    # a retained move is told by the kind of page kept (anon, file, shmem); a step's by its breakdown
    group = "retained" if change.figure == "retained" else "breakdown"
    candidates = [(abs(d), f"{group}.{n}", d) for n, d in found.get(group, {}).items()]
    if candidates and max(candidates)[0] >= GRAIN_BYTES:
        _, name, delta = max(candidates)
        found["moved"] = f"{name} {delta / MIB:+.2f} MiB"
    else:  # JAX/TF compiled: a breakdown of params only, which does not move
        found["moved"] = f"no {group} part moved by {GRAIN_BYTES // 1024} KiB or more"
    return found


def verdicts(records, workload, mode, release):
    """The leak verdicts of a cell's rounds at `release` (figures.leak_verdict), of the
    records that carry one."""
    return [figures.leak_verdict(r) for r in records
            if (r.get("workload"), r.get("mode")) == (workload, mode) and release_of(r) == release
            and figures.leak_verdict(r)]


def turn(before, after):
    """"starts growing" where no round of the earlier release grows and every round of the
    later one does, "stops growing" the other way round (settling is not growing: a cache
    that fills and stops), else None."""
    if not before or not after:
        return None
    if not any(v == "grows" for v in before) and all(v == "grows" for v in after):
        return "starts growing"
    if all(v == "grows" for v in before) and not any(v == "grows" for v in after):
        return "stops growing"
    return None


def growth_parts(records, change):
    """What a change of the growth per step says beyond its figure: each release's leak
    verdicts, and whether the cell starts or stops growing there."""
    before = verdicts(records, change.workload, change.mode, change.before_release)
    after = verdicts(records, change.workload, change.mode, change.release)
    said = turn(before, after)
    return {"verdicts": {"before": before, "after": after},
            "moved": f"{said or 'verdicts'}: {', '.join(before) or '-'} -> {', '.join(after) or '-'}"}


def code_moved(records, change, before=None, after=None):
    """{"delta", "estimated"}: how far the library code pages inside `change`'s figure
    moved, median to median, over the records of its two releases (`before`/`after`:
    those records given apart, e.g. the side-by-side samples), where every record tells
    them (figures.code_part; estimated where the records were written before the
    figure's own were kept); None where the figure holds none or the records cannot tell."""
    if not (figures.get(change["figure"] if isinstance(change, dict) else change.figure).code_part):
        return None
    if before is None:
        key = (change.workload, change.mode)
        before = [r for r in records if (r.get("workload"), r.get("mode")) == key
                  and release_of(r) == change.before_release]
        after = [r for r in records if (r.get("workload"), r.get("mode")) == key and release_of(r) == change.release]
    figure = change["figure"] if isinstance(change, dict) else change.figure
    sides = [[figures.code_part(r, figure) for r in side if r.get("status", "ok") == "ok"] for side in (before, after)]
    if not all(sides) or any(v is None for side in sides for v, _ in side):
        return None
    medians = [statistics.median(v for v, _ in side) for side in sides]
    return {"delta": medians[1] - medians[0], "estimated": any(e for side in sides for _, e in side)}


def report(records, found, framework, env_info, size="small", commits=(), leak=()):
    """The JSON document of what was found (FRAMEWORK.changes.json); `commits`: the
    stage-2 findings of FRAMEWORK.commits.json (harness/bisect/findings.py), each
    named beside the change it bisected; `leak`: the leak-only pass's records, whose
    verdicts a change of the growth per step names."""
    listed = []
    pythons = store.release_pythons(records, env_info)
    for change in found.changes:
        differs = _dependencies_differ(env_info, change.before_release, change.release, pythons)
        # bisect measures the registry's figures it lists; a prediction it does not bisect
        metric = change.figure if figures.get(change.figure).listed_in(figures.BISECT) else None
        command = None if metric is None else (
            f"python -m harness bisect --framework {framework} --workload {change.workload} "
            f"--mode {change.mode} --size {size} --metric {metric} --good {change.before_release} "
            f"--bad {change.release}")
        entry = {
            "workload": change.workload, "mode": change.mode, "figure": change.figure,
            "before_release": change.before_release, "release": change.release,
            "before": change.before, "after": change.after, "delta": change.delta,
            "relative": change.relative, "direction": change.direction, "worse": change.worse, "band": change.band,
            "before_samples": list(change.before_samples), "after_samples": list(change.after_samples),
            "advisory": change.advisory, "advisory_why": figures.get(change.figure).advisory or None,
            "parts": (growth_parts(list(records) + list(leak), change) if change.figure == GROWTH
                      else parts(records, change)),
            "dependencies_differ": differs,
            "command": command,
            "unmeasured_between": list(change.unmeasured_between),
        }
        if change.figure == GROWTH:  # a release where the cell starts or stops growing says so
            entry["growth"] = turn(*entry["parts"]["verdicts"].values())
        # stage 2 (`harness bisect --repo`) installs a commit without a build hook only where pip alone can
        if frameworks.get(framework).installs_from_source and not change.advisory and command:
            entry["commit_command"] = (command.replace(f"--good {change.before_release} --bad {change.release}",
                                                       "--repo CHECKOUT --good <tag of "
                                                       f"{change.before_release}> --bad <tag of {change.release}>"))
        search = commit_search(commits, framework, change, size)
        if search:
            entry["commit_search"] = search
            entry["commit"] = search.get("first_bad")
        listed.append(entry)
    return {
        "framework": framework,
        "rule": ("a change: |median(B) - median(A)| > band and no overlap of the two releases' rounds; band = the "
                 f"larger spread (max - min) of the two releases' rounds, at least {GRAIN_BYTES // 1024} KiB for memory"
                 + OWN_GRAINS),
        "meaning": MEANING,
        "changes": listed,
        "flat": [{"workload": w, "mode": m, "figure": f, "releases": n, "largest_move_over_band": round(r, 3)}
                 for w, m, f, n, r in found.flat],
        "unjudged_pairs": found.unjudged,
    }


def commit_search(commits, framework, change, size):
    """The stage-2 finding that bisected exactly this change (its series, metric and
    release pair), the newest if several; None when none did."""
    mine = [f for f in commits
            if (f.get("framework"), f.get("workload"), f.get("mode"), f.get("size"), figures.resolve(f.get("metric"))) ==
            (framework, change.workload, change.mode, size, change.figure)
            and f.get("device", "cpu") == "cpu" and f.get("stage") == "commits"
            and list(f.get("releases") or []) == [change.before_release, change.release]]
    if not mine:
        return None
    keep = ("kind", "first_bad", "last_good", "suspects", "good_figure", "bad_figure", "change", "probes",
            "confirmed", "wall_s", "when", "command")
    return {k: mine[-1][k] for k in keep if k in mine[-1]}


def _dependencies_differ(env_info, a, b, pythons=None):
    """{dist: [version at a, version at b]} for NumPy/SciPy, and "python" (minor version)
    when the two releases ran in different interpreters (a release that needs a newer
    Python, harness/versions/interpreters.py), where the two environments differ."""
    va = (env_info.get(a) or {}).get("versions") or {}
    vb = (env_info.get(b) or {}).get("versions") or {}
    # both known: an environment built by an older gradmem may not list SciPy (not a difference)
    found = {d: [va[d], vb[d]] for d in ("numpy", "scipy") if va.get(d) and vb.get(d) and va[d] != vb[d]}
    pa, pb = (pythons or {}).get(a), (pythons or {}).get(b)
    if pa and pb and pa.split(".")[:2] != pb.split(".")[:2]:
        found["python"] = [pa, pb]
    return found


def _in_unit(figure, value):
    """(`value` as written, its unit): ms, KiB for a figure of small moves (the growth
    per step), else MiB."""
    if FIGURES[figure] == "seconds":
        return f"{value * 1000:.2f}", "ms"
    if grain(figure) < GRAIN_BYTES:
        return f"{value / 1024:.1f}", "KiB"
    return f"{value / MIB:.2f}", "MiB"


def fmt(figure, value):
    return " ".join(_in_unit(figure, value))


def unit(figure):
    return _in_unit(figure, 0)[1]


def number(figure, value):
    """`value` in `figure`'s unit, as `fmt` writes it, without the unit (a list of samples,
    a pair "A -> B unit" that names the unit once)."""
    return _in_unit(figure, value)[0]


def growth_note(change):
    """' [starts growing: flat, flat -> grows, grows]' for a change of the growth per step
    where the cell starts or stops growing, else ''."""
    if not change.get("growth"):
        return ""
    found = (change.get("parts") or {}).get("verdicts") or {}
    return f" [{change['growth']}: {', '.join(found.get('before', []))} -> {', '.join(found.get('after', []))}]"


def gap_note(change):
    """Said wherever a change is shown: where the series skips releases the sweep measured
    elsewhere, the move lies somewhere in them, not at `release` itself."""
    gap = change.get("unmeasured_between") or []
    if not gap:
        return ""
    return (f" [not consecutive: {len(gap)} release(s) between ({gap[0]}..{gap[-1]}) not measured on this series; "
            f"the move is somewhere in them or at {change['release']}]")


def summary(document):
    """Lines for the terminal: every change, then how many figures stayed flat."""
    lines = []
    for c in document["changes"]:
        rel = f" ({c['relative']:+.1%})" if c["relative"] is not None else ""
        note = f" [advisory: {c.get('advisory_why') or 'time'}]" if c["advisory"] else ""
        deps = f" [dependencies differ: {c['dependencies_differ']}]" if c["dependencies_differ"] else ""
        note += gap_note(c) + growth_note(c)
        lines.append(
            f"change {c['workload']} {c['mode']} {c['figure']}: {c['before_release']} -> {c['release']} "
            f"{fmt(c['figure'], c['before'])} -> {fmt(c['figure'], c['after'])}{rel}, band "
            f"{fmt(c['figure'], c['band'])}{note}{deps}"
        )
    lines.append(f"{len(document['changes'])} change(s); {len(document['flat'])} (workload, mode, figure) series flat; "
                 f"{document['unjudged_pairs']} pair(s) not judged (fewer than 2 rounds)")
    return "\n".join(lines)
