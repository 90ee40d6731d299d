"""What a `harness bisect --record FILE` leaves behind: one finding per bisection, kept
in a JSON list (rewritten whole, atomically), so a release sweep's changes can name the
commit stage 2 found for them (harness/releases/detect.py reads FRAMEWORK.commits.json).

A finding says which series it bisected (framework, workload, mode, size, dtype,
device, metric), between which releases (`releases`: the pair of versions the good and
bad revisions are, from their tags or --releases), what came out (`kind`: culprit,
no_difference or range, as harness/bisect/bisection.py decides) and the evidence:
both figures, the probes' count, whether the boundary repeated, wall time, and the
command that makes it again."""

import json
import re
import shlex
import time

from harness import figures, results
from harness.choices import ChoiceError

#: a release tag: an optional non-digit prefix (v1.7.0, rel-3.0.1, tinygrad-v0.12.0) and the version
TAG = re.compile(r"^[^\d]*(\d[\w.]*)$")


def release_of(tag):
    """The version a tag names, None for a hash or branch."""
    found = TAG.match(tag or "")
    if not found or re.fullmatch(r"[0-9a-f]{7,40}", tag):
        return None
    return found.group(1)


def releases_pair(args):
    """(good release, bad release) this bisection lies between, or None: --releases A,B
    when given (a checkout whose release has no tag), else read from the tags."""
    if args.releases:
        pair = [v.strip() for v in args.releases.split(",")]
        if len(pair) != 2 or not all(pair):
            raise ChoiceError(f"--releases {args.releases!r}: two versions, GOOD,BAD (e.g. 1.6.2,1.7.0)")
        return pair
    pair = [release_of(args.good), release_of(args.bad)]
    return pair if all(pair) else None


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        raise ChoiceError(f"{path}: not a findings file ({err}); --record takes a JSON list or a new path") from None
    if not isinstance(found, list):
        raise ChoiceError(f"{path}: not a findings file (a JSON list); --record takes one or a new path")
    return found


def record(path, finding):
    """Add `finding` to the list at `path`, replacing an earlier one of the same series
    and revisions (a bisection run again supersedes its first result)."""
    same = ("framework", "workload", "mode", "size", "dtype", "device", "metric", "good", "bad")

    def key(found):  # a finding recorded with a figure's older name (total, backward ...) is the same series
        return [figures.resolve(found.get(k)) if k == "metric" else found.get(k) for k in same]

    kept = [f for f in read(path) if key(f) != key(finding)]
    results.write_json_atomic(path, kept + [finding])


def command(adapter, args):
    """The bisect command that makes this finding again (every option that shapes it)."""
    parts = ["python -m harness bisect", "--framework", adapter.name, "--workload", args.workload, "--mode", args.mode,
             "--size", args.size, "--dtype", args.dtype, "--device", args.device, "--metric", args.metric,
             "--threshold", f"{args.threshold:g}", "--good", args.good, "--bad", args.bad]
    for option, value in (("--repo", args.repo), ("--releases", args.releases), ("--optimizer", args.optimizer)):
        if value:
            parts += [option, value]
    return " ".join(shlex.quote(p) if p != parts[0] else p for p in parts)


def finding(adapter, args, stage, result, wall_s):
    name = stage.name
    out = {
        "framework": adapter.name, "workload": args.workload, "mode": args.mode, "size": args.size,
        "dtype": args.dtype, "device": args.device, "metric": args.metric, "threshold": args.threshold,
        "stage": stage.kind, "good": args.good, "bad": args.bad, "releases": releases_pair(args),
        "kind": result.kind, "good_figure": result.good_figure, "bad_figure": result.bad_figure,
        "change": result.change, "probes": len(result.probes), "confirmed": bool(getattr(result, "confirmed", False)),
        "wall_s": round(wall_s, 1), "when": time.strftime("%Y-%m-%d"),
        "command": command(adapter, args),
    }
    if result.kind == "culprit":
        out["first_bad"] = name(result.first_bad, full=True)
        out["last_good"] = name(result.last_good, full=True)
    elif result.kind == "range":
        out["suspects"] = [name(c, full=True) for c in result.suspects]
    return out
