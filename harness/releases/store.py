"""Where a release sweep keeps its records, per framework, under --out DIR:

    DIR/FRAMEWORK.jsonl          every record, each with `release_round` (1..N): the
                                 committed file, rewritten whole after each round;
                                 without the bulky per-step lists (`COMPACTED`: every
                                 timed step's seconds, the RSS timeline), which the
                                 round files keep
    DIR/FRAMEWORK.envs.json      per release: its environment's versions, what differs
                                 from the pinned NumPy/SciPy, build time, disk
    DIR/FRAMEWORK.changes.json   what harness/releases/detect.py found
    DIR/FRAMEWORK.commits.json   stage 2's findings (`harness bisect --repo --record`):
                                 the commit each bisected change was found at
    DIR/FRAMEWORK.confirm.jsonl  the side-by-side samples that confirm or reject each
                                 flagged change (side_by_side.py, judged by confirm.py)
    DIR/FRAMEWORK.confirm.withdrawn.jsonl  samples taken out of the confirmation by
                                 `--confirm --measure-again REASON` (side_by_side.withdraw),
                                 each with its reason: judged by nothing, never lost
    DIR/FRAMEWORK.withdrawn.jsonl  sweep records taken out by `--resume --measure-again
                                 REASON` (withdraw), each with its round and reason, their
                                 cells then measured anew: read by nothing but the page's
                                 note, never lost
    DIR/FRAMEWORK.leak.jsonl     the leak-only pass (leak_pass.py): the growth per step of
                                 the cells whose records lack it, read for that figure only
    DIR/FRAMEWORK.html           the page (harness/releases/page.py)
    DIR/.rounds/FRAMEWORK/round-K.jsonl   the working file of round K: the round's sweep
                                 (harness/sweep/api.py) appends there, and resumes
                                 from it

Why one JSONL file per framework rather than asv results with the release as the x
axis: asv keys a result by the *benchmarked project's commit* and keeps one
environment per commit (asv#789), while a release sweep needs several rounds of one
release (its run-to-run band), pinned era dependencies per release, and `unavailable`
records with pip's reason; none of that has a place in asv's result files. A JSONL
record is the schema `harness report` already reads.
"""

import json
import os

from harness import interrupts, results
from harness.sweep import resume
from harness.versions import index

ROUND_KEY = "release_round"
#: rounds per release when `harness releases --repeats` is not given: the run-to-run band
#: the detector needs (a store records its own count in FRAMEWORK.sweep.json's grid)
DEFAULT_ROUNDS = 3
#: left out of FRAMEWORK.jsonl (14 KB of a 20 KB record; no figure of the page uses them)
COMPACTED = ("time_samples_s", "timeline")


def merged_path(out, framework):
    return os.path.join(out, f"{framework}.jsonl")


def round_path(out, framework, number):
    return os.path.join(out, ".rounds", framework, f"round-{number}.jsonl")


def envs_path(out, framework):
    return os.path.join(out, f"{framework}.envs.json")


def rounds_held(out, framework, rounds):
    """`rounds`, or more where the store already holds more: a store swept with
    --repeats 3 and resumed with --repeats 2 keeps its third round (merge rewrites the
    committed file from the round files, and a round left out would be lost)."""
    held = [r.get(ROUND_KEY) for r in resume.records_in(merged_path(out, framework))]
    folder = os.path.dirname(round_path(out, framework, 1))
    if os.path.isdir(folder):
        held += [int(name[len("round-"):-len(".jsonl")]) for name in os.listdir(folder)
                 if name.startswith("round-") and name.endswith(".jsonl") and name[6:-6].isdigit()]
    return max([rounds] + [n for n in held if isinstance(n, int)])


def seed_rounds(out, framework, rounds):
    """A committed FRAMEWORK.jsonl with no working files beside it (a fresh checkout):
    the round files made again from it, so --resume measures only what is missing."""
    merged = resume.records_in(merged_path(out, framework))
    for number in range(1, rounds_held(out, framework, rounds) + 1):
        path = round_path(out, framework, number)
        if os.path.exists(path):
            continue
        mine = [_untagged(r) for r in merged if r.get(ROUND_KEY) == number]
        if mine:
            results.write_records(path, mine)


def compact(record):
    """`record` without the COMPACTED lists (the timeline, a key ok records must have,
    becomes null), naming what was left out in `compacted`."""
    left = [k for k in COMPACTED if record.get(k) is not None]
    if not left:
        return dict(record)
    kept = {k: v for k, v in record.items() if k != "time_samples_s"}
    if "timeline" in kept:
        kept["timeline"] = None
    kept["compacted"] = left
    return kept


def _untagged(record):
    return {k: v for k, v in record.items() if k != ROUND_KEY}


def merge(out, framework, rounds):
    """Rewrite FRAMEWORK.jsonl from the round files (each record tagged with its round),
    every round held, not only the first `rounds`."""
    merged = []
    for number in range(1, rounds_held(out, framework, rounds) + 1):
        for record in resume.records_in(round_path(out, framework, number)):
            merged.append(dict(compact(record), **{ROUND_KEY: number}))
    results.write_records(merged_path(out, framework), merged)
    return merged


def _read_json(path):
    """The JSON document at `path`, {} when absent or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def read_envs(out, framework):
    return _read_json(envs_path(out, framework))


#: per-release figures that add up over resumed sweeps (the whole wall time measuring it, the sweep's and
#: the leak-only pass's)
SUMMED = ("measure_s", "leak_measure_s")


def write_env(out, framework, version, info):
    known = read_envs(out, framework)
    before = known.get(version, {})
    known[version] = dict(before, **info)
    for key in SUMMED:
        if key in info and isinstance(before.get(key), (int, float)):
            known[version][key] = round(before[key] + info[key], 1)
    results.write_json_atomic(envs_path(out, framework), known)


def _take(out, framework, taken, keep_taken=None):
    """Take the records for which `taken(record)` is true out of every round file;
    `keep_taken(record, round)` is called for each first (with nothing lost if the
    process dies between the two: a record then stands in both places, never in
    neither). Returns how many."""
    count = 0
    for number in range(1, rounds_held(out, framework, 1) + 1):
        path = round_path(out, framework, number)
        kept, gone = [], []
        for record in resume.records_in(path):
            (gone if taken(record) else kept).append(record)
        if gone:
            with interrupts.deferred():  # a stop waits for the round file to be whole
                for record in gone if keep_taken is not None else ():
                    keep_taken(record, number)
                results.write_records(path, kept)
            count += len(gone)
    return count


def forget(out, framework, version, statuses, keys):
    """Drop `version`'s records whose status is one of `statuses` and whose cell key
    (sweep.resume.key) is in `keys`, from every round (--retry: the cells are measured
    again, and the old records must not stand beside the new ones); a retried
    `unavailable` also leaves the release's environment entry. Returns how many."""
    count = _take(out, framework, lambda r: (r.get("version") == version and r.get("status") in statuses
                                             and resume.key(r) in keys))
    known = read_envs(out, framework)
    if count and "unavailable" in statuses and "unavailable" in known.get(version, {}):
        known.pop(version)
        results.write_json_atomic(envs_path(out, framework), known)
    return count


WITHDRAWN_KEY = "withdrawn"  # on a withdrawn record or sample: {"reason", "at"}


def withdraw(out, framework, version, keys, reason, at):
    """Move `version`'s records whose cell key (sweep.resume.key) is in `keys`, whatever
    their status, from every round to FRAMEWORK.withdrawn.jsonl, each tagged with its
    round and {"reason": `reason`, "at": `at`} (`--resume --measure-again`: records known
    to be wrong, measured again; never lost). Returns how many; the caller merges."""
    stamp = {"reason": reason, "at": at}

    def keep(record, number):
        results.append_record(sweep_withdrawn_path(out, framework),
                              dict(compact(record), **{ROUND_KEY: number, WITHDRAWN_KEY: stamp}))

    return _take(out, framework, lambda r: r.get("version") == version and resume.key(r) in keys, keep)


def measured_again(withdrawn, key_of=lambda record: record.get("version")):
    """{key_of(record): {"withdrawn": n, "reason", "at"}} of withdrawn records (by
    release, by default; confirm.measured_again: by pair), with the latest withdrawal's
    reason and time where one was measured again more than once."""
    out = {}
    for record in withdrawn:
        key, stamp = key_of(record), record.get(WITHDRAWN_KEY)
        if key is None or not isinstance(stamp, dict):
            continue
        held = out.setdefault(key, {"withdrawn": 0, "reason": "", "at": ""})
        held["withdrawn"] += 1
        if str(stamp.get("at") or "") >= held["at"]:
            held["reason"], held["at"] = str(stamp.get("reason") or ""), str(stamp.get("at") or "")
    return out


def sweep_withdrawn_path(out, framework):
    return os.path.join(out, f"{framework}.withdrawn.jsonl")


def confirm_path(out, framework):
    return os.path.join(out, f"{framework}.confirm.jsonl")


def withdrawn_path(out, framework):
    return os.path.join(out, f"{framework}.confirm.withdrawn.jsonl")


def leak_path(out, framework):
    """The leak-only pass's records (harness/releases/leak_pass.py): memory passes of the
    store's cells whose records lack the growth per step, compacted, each with its
    `release_round`; the detector and the page read that one figure of them."""
    return os.path.join(out, f"{framework}.leak.jsonl")


def release_pythons(records, env_info):
    """release -> the Python (X.Y.Z) its workers ran: what the records' provenance says,
    else what its environment was built with (a release with no ok record). The one
    source of both the detector's "python differs" and the page's environment column."""
    found = {v: info["python"] for v, info in env_info.items() if (info or {}).get("python")}
    for record in records:
        python = (record.get("provenance") or {}).get("python")
        # an `unavailable` record never reached the release's environment: its provenance
        # names the Python gradmem runs on, not the release's
        if python and record.get("version") and record.get("status") != "unavailable":
            found[record["version"]] = python
    return found


def commits_path(out, framework):
    """Stage 2's findings (`harness bisect --repo ... --record` this path): the page names
    the commit beside the change it bisected."""
    return os.path.join(out, f"{framework}.commits.json")


def read_commits(out, framework):
    found = _read_json(commits_path(out, framework))
    return found if isinstance(found, list) else []


def changes_path(out, framework):
    return os.path.join(out, f"{framework}.changes.json")


def meta_path(out, framework):
    return os.path.join(out, f"{framework}.sweep.json")


def read_meta(out, framework):
    return _read_json(meta_path(out, framework))


#: meta keys that accumulate over sweeps (a resumed or widened sweep adds to them)
ACCUMULATED = ("yanked", "uploaded")


def write_meta(out, framework, info):
    """What the sweeps covered: the releases (every sweep's, in version order), yanked
    ones and upload dates (accumulated), and the last sweep's grid and wall time."""
    known = read_meta(out, framework)
    merged = dict(known, **info)
    for key in ACCUMULATED:
        merged[key] = dict(known.get(key) or {}, **(info.get(key) or {}))
    if "releases" in info:
        merged["releases"] = sorted(set(known.get("releases") or []) | set(info["releases"]), key=index.sort_key)
    results.write_json_atomic(meta_path(out, framework), merged)

