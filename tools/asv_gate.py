#!/usr/bin/env python
"""Regression gate for CI: fail when a stored asv figure got worse than its baseline.

`asv compare` always exits 0 and has one factor for everything; memory is
near-deterministic (a 2 % growth is real) while time is noisy (10 % is not much), so
this reads the stored results itself and applies a threshold per unit:

    python tools/asv_gate.py --machine NAME                 # HEAD vs the nearest
                                                            # ancestor with results
    python tools/asv_gate.py --machine NAME --base v1 --head HEAD --kinds memory

Memory means the *step peak* (asv's PeakMemory: what one step needs above what was
resident at its start; docs/measurement.md) unless --memory-bench names others: the
retained bytes and the footprint are shown on the site and in the table, but a change
in what a framework keeps between steps is not what this gate judges by default.

A figure *worsens* when after > before × (1 + threshold) and after − before exceeds an
absolute floor (512 KiB of memory, a millisecond: below that is measurement grain, not
a regression; the memory floor is about twice the process-to-process spread of the
RSS-based peak on a small cell, 232 KiB over 13 sweeps of the reference engine's
rnn_fanout at `small`, 4.68-4.92 MB, so a no-op commit does not fail the gate). A cell that had a figure and now has none (it started to
fail, oom or time out) worsens too. A time the harness marked noisy on either side
(bench_time.TimeNoise.track_noisy = 1: other processes took a CPU during its repeats,
or they spread widely) is *advisory*: listed, never failing. Exit 0 when nothing
worsened, 1 when something did, 2 when the comparison cannot be made (no results for
a commit, bad arguments).
"""

import argparse
import itertools
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass

UNIT_KIND = {"bytes": "memory", "seconds": "time"}
KINDS = ("memory", "time")
NOISE_BENCHMARK = "bench_time.TimeNoise.track_noisy"  # 1.0 where a cell's time is noisy


@dataclass
class Change:
    benchmark: str
    params: str
    env: str
    kind: str
    before: float
    after: float
    worse: bool
    advisory: bool = False  # a noisy time: shown, never failing

    @property
    def ratio(self):
        if not _finite(self.after):
            return math.inf
        return self.after / self.before if self.before else math.inf


class GateError(RuntimeError):
    """The comparison cannot be made; the message says why."""


def _finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def git(repo, *args):
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise GateError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def load_results(results_dir, machine, commit):
    """{env_name: asv Results} stored for `commit` on `machine`."""
    from asv import results as asv_results

    found = {}
    try:
        for result in asv_results.iter_results_for_machine_and_hash(results_dir, machine, commit):
            found[result.env_name] = result
    except Exception as err:  # asv raises UserError for unknown prefixes/machines
        raise GateError(f"no results for {commit[:8]} on {machine}: {err}") from None
    return found


def nearest_baseline(repo, results_dir, machine, head):
    """The nearest first-parent ancestor of `head` with stored results on `machine`."""
    from asv import results as asv_results

    stored = {h for h in asv_results.get_existing_hashes(results_dir)}
    for commit in git(repo, "rev-list", "--first-parent", f"{head}~1").split():
        if commit in stored and load_results(results_dir, machine, commit):
            return commit
    raise GateError(f"no ancestor of {head[:8]} has results on machine {machine!r} in {results_dir}")


def benchmark_units(results_dir):
    import json

    path = os.path.join(results_dir, "benchmarks.json")
    if not os.path.exists(path):
        raise GateError(f"{path} is missing: run asv once to record the suite")
    try:
        with open(path, encoding="utf-8") as handle:
            suite = json.load(handle)
    except ValueError as err:  # asv skips damaged result files itself, naming them
        raise GateError(f"{path}: not valid JSON ({err}); rewrite it with `asv run --bench just-discover`") from None
    return {name: info for name, info in suite.items() if isinstance(info, dict) and "unit" in info}


def noisy_cells(result, suite):
    """The parameter combinations (as tuples) whose time is marked noisy in `result`."""
    if NOISE_BENCHMARK not in suite or NOISE_BENCHMARK not in result.get_result_keys(suite):
        return set()
    params = result.get_result_params(NOISE_BENCHMARK)
    values = result.get_result_value(NOISE_BENCHMARK, params)
    return {combo for combo, value in zip(itertools.product(*params), values) if value == 1.0}


#: the memory benchmarks the gate judges by default: the step peak per phase
STEP_PEAK = r"\.PeakMemory\."


def compare(before_results, after_results, suite, thresholds, floors, pattern=None, memory_pattern=STEP_PEAK):
    """Every figure present on both sides, as Changes (worse ones flagged). Memory
    benchmarks count only where they match `memory_pattern` (default: the step peak)."""
    changes = []
    for env in sorted(set(before_results) & set(after_results)):
        before, after = before_results[env], after_results[env]
        noisy = noisy_cells(before, suite) | noisy_cells(after, suite)
        for name in sorted(set(before.get_result_keys(suite)) & set(after.get_result_keys(suite))):
            kind = UNIT_KIND.get(suite[name].get("unit"))
            if kind not in thresholds or (pattern and not re.search(pattern, name)):
                continue
            if kind == "memory" and memory_pattern and not re.search(memory_pattern, name):
                continue
            params = after.get_result_params(name)
            old = before.get_result_value(name, params)
            new = after.get_result_value(name, params)
            names = suite[name].get("param_names") or []
            raw = list(itertools.product(*params)) if params else [()]
            combos = [", ".join(f"{n}={v.strip(chr(39))}" for n, v in zip(names, combo)) for combo in raw]
            if not params:
                old, new = [old], [new]
            for key, combo, a, b in zip(raw, combos, old, new):
                if not _finite(a):
                    continue  # no baseline figure: nothing to regress from
                if not _finite(b):
                    worse = True  # it ran before and does not now
                else:
                    worse = b > a * (1 + thresholds[kind]) and b - a > floors[kind]
                advisory = worse and kind == "time" and key in noisy and _finite(b)
                changes.append(Change(name, combo, env, kind, a, b, worse and not advisory, advisory))
    return changes


def _human(value, kind):
    if not _finite(value):
        return "n/a"
    if kind == "memory":
        return f"{value / 2**20:.3f} MiB"
    return f"{value * 1e3:.3f} ms"


def report(changes, out=sys.stdout):
    worse = sorted((c for c in changes if c.worse), key=lambda c: -c.ratio)
    for change in worse:
        ratio = "now n/a" if not _finite(change.after) else f"{change.ratio:.3f}x"
        print(f"WORSE  {ratio:>9}  {_human(change.before, change.kind):>14} -> "
              f"{_human(change.after, change.kind):>14}  {change.benchmark}({change.params}) [{change.env}]", file=out)
    advisory = sorted((c for c in changes if c.advisory), key=lambda c: -c.ratio)
    for change in advisory:
        print(f"NOISY  {change.ratio:>8.3f}x  {_human(change.before, change.kind):>14} -> "
              f"{_human(change.after, change.kind):>14}  {change.benchmark}({change.params}) [{change.env}] "
              "(time marked noisy: advisory, not failing)", file=out)
    print(f"{len(worse)} of {len(changes)} figures worsened"
          + (f"; {len(advisory)} noisy time(s) beyond the threshold, advisory" if advisory else ""), file=out)
    return worse


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="asv.conf.json")
    parser.add_argument("--machine", required=True, help="machine name the results are stored under")
    parser.add_argument("--head", default="HEAD", help="commit to judge (default HEAD)")
    parser.add_argument("--base", help="baseline commit (default: nearest ancestor with results)")
    parser.add_argument("--kinds", default="memory,time", help="memory, time or both (default both)")
    parser.add_argument("--memory-threshold", type=float, default=0.02, help="relative growth allowed (0.02 = 2%%)")
    parser.add_argument("--time-threshold", type=float, default=0.10)
    parser.add_argument("--memory-floor", type=float, default=512 * 1024,
                        help="bytes of growth always allowed (default 512 KiB: RSS grain, see above)")
    parser.add_argument("--time-floor", type=float, default=1e-3, help="seconds of growth always allowed")
    parser.add_argument("--bench", help="only benchmarks matching this regex")
    parser.add_argument("--memory-bench", default=STEP_PEAK,
                        help="memory benchmarks judged (regex; default the step peak, PeakMemory)")
    args = parser.parse_args(argv)

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        print(f"error: unknown kind {', '.join(bad) or '(none)'}; valid kinds: {', '.join(KINDS)}", file=sys.stderr)
        return 2
    try:
        from asv.config import Config

        conf = Config.load(args.config)
        repo = os.path.abspath(conf.repo) if not re.match(r"^\w+://", conf.repo) else "."
        head = git(repo, "rev-parse", "--verify", f"{args.head}^{{commit}}")
        base = (git(repo, "rev-parse", "--verify", f"{args.base}^{{commit}}") if args.base
                else nearest_baseline(repo, conf.results_dir, args.machine, head))
        before = load_results(conf.results_dir, args.machine, base)
        after = load_results(conf.results_dir, args.machine, head)
        for commit, found in ((base, before), (head, after)):
            if not found:
                raise GateError(f"no results for {commit[:8]} on machine {args.machine!r}")
        if not set(before) & set(after):
            raise GateError(f"no environment in common: {sorted(before)} vs {sorted(after)}")
        suite = benchmark_units(conf.results_dir)
    except GateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    thresholds = {k: getattr(args, f"{k}_threshold") for k in kinds}
    floors = {"memory": args.memory_floor, "time": args.time_floor}
    print(f"gate: {base[:8]} -> {head[:8]} on {args.machine}; "
          + ", ".join(f"{k} +{t:.0%}" for k, t in thresholds.items()))
    changes = compare(before, after, suite, thresholds, floors, args.bench, args.memory_bench)
    if not changes:
        print("error: no figure present on both sides to compare", file=sys.stderr)
        return 2
    return 1 if report(changes) else 0


if __name__ == "__main__":
    sys.exit(main())
