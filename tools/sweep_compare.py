#!/usr/bin/env python
"""The default sweep under the old serial schedule and the parallel one, side by side.

    .venv/bin/python tools/sweep_compare.py                 # 1 pair: serial, then parallel
    .venv/bin/python tools/sweep_compare.py --runs 2        # serial, parallel, parallel, serial
    .venv/bin/python tools/sweep_compare.py --runs 1 -- --workload chained_dot --size tiny

Each run is `python -m harness run --size small` (what `make run` sweeps: 36 cells)
plus any arguments after `--`, with `--schedule serial|parallel` and a
`--schedule-log`. Runs alternate (serial first in even pairs, parallel first in odd
ones) so a change in the machine's load hits both. Printed:

1. the wall time of every run and the median per schedule;
2. where each schedule's time went, per stage of the passes (worker-seconds summed over
   passes: interpreter start, framework import + runtime warm-up, building the
   problem, each kind of step, the gradient check, interpreter teardown), and the
   parent's own time (no pass running);
3. every memory figure of every cell (each `*_bytes` figure of an ok record but the
   bound) of the parallel run against the serial run: relative and absolute
   differences, with the serial-vs-serial difference as the control when --runs >= 2.

Files go to --out (default out/sweep-compare/). Exit 0; 1 when a memory figure differs
by more than --tolerance (default 1 %) *and* more than the RSS grain (--grain, 256 KiB).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.sweep import outcome  # noqa: E402  (the checkout's harness)

SCHEDULES = ("serial", "parallel")
KiB = 1024


# ---- running ------------------------------------------------------------------------------
def run_sweep(schedule, index, out_dir, extra):
    records = os.path.join(out_dir, f"{schedule}-{index}.jsonl")
    log = os.path.join(out_dir, f"{schedule}-{index}.log")
    for path in (records, log):
        if os.path.exists(path):
            os.remove(path)
    command = [sys.executable, "-m", "harness", "run", "--size", "small", *extra,
               "--schedule", schedule, "--schedule-log", log, "--quiet", "--out", records]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - started
    if done.returncode not in outcome.RAN_TO_THE_END:  # a failed cell is a record
        raise SystemExit(f"sweep failed ({done.returncode}): {' '.join(command)}\n{done.stdout[-3000:]}")
    return {"schedule": schedule, "index": index, "wall_s": wall, "records": records, "log": log,
            "load_before": None}


# ---- where the time went -------------------------------------------------------------------
def stage_of(kind, mark):
    """The stage a segment of a pass belongs to, named by the mark that opens it."""
    if mark == "start":
        return "import + load + runtime warm-up"
    if mark in ("loaded", "planned"):
        return "build problem (+ plan)"
    if mark == "exit":
        return "interpreter teardown"
    if kind == "reference_gradient":
        return "reference gradient compute"
    if kind == "time":
        return {"first-step": "time: first step", "warm-up": "time: warm-up", "timed": "time: timed steps",
                "ready": "time: waiting at the gate (idle)", "go": "time: first step"}.get(mark, f"time: {mark}")
    if mark == "baseline" or mark.startswith("first:") and mark != "first:end":
        return "memory: first step"
    if mark == "first:end":
        return "memory: gradient check"
    if mark == "warm-up":
        return "memory: warm-up"
    if mark.startswith("traced:"):
        return "memory: tracemalloc step"
    if mark == "breakdown":
        return "memory: breakdown step"
    return "memory: steady steps"


def stages(log_path):
    """({stage: worker-seconds}, sweep summary, [(start, end)] of every pass)."""
    totals, intervals, summary = defaultdict(float), [], {}
    with open(log_path, encoding="utf-8") as handle:
        for line in handle:
            entry = json.loads(line)
            if "sweep" in entry:
                summary = entry["sweep"]
                continue
            length = entry["ended_s"] - entry["started_s"]
            intervals.append((entry["started_s"], entry["ended_s"]))
            marks = entry["marks"]
            totals["interpreter start"] += marks[0][0] if marks else length
            for (t, name), nxt in zip(marks, marks[1:] + [[length, None]]):
                totals[stage_of(entry["pass"], name)] += max(0.0, nxt[0] - t)
            totals[f"passes: {entry['pass']}"] += 0  # keeps the kinds listed
    return totals, summary, intervals


def busy_time(intervals):
    """Seconds during which at least one pass ran (the union of the intervals)."""
    total, end = 0.0, -1.0
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


# ---- memory figures ----------------------------------------------------------------------
def memory_figures(record):
    """{figure name: bytes} of an ok record: every top-level *_bytes figure (phases
    flattened), the analytic bound left out (it is not measured)."""
    found = {}

    def walk(prefix, value):
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            found[prefix] = value
        elif isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)

    for key, value in record.items():
        if key.endswith("_bytes") and key != "bound_bytes":
            walk(key, value)
    return found


def cell_key(record):
    return tuple(record.get(k) for k in ("workload", "framework", "mode", "device", "size", "dtype",
                                         "optimizer", "remat", "order"))


def load_figures(path):
    from harness.results import read_records

    return {cell_key(r): memory_figures(r) for r in read_records(path) if r.get("status") == "ok"}


def differences(a, b):
    """[(cell, figure, a, b)] for every figure both runs have."""
    out = []
    for cell in sorted(set(a) & set(b), key=str):
        for name in sorted(set(a[cell]) & set(b[cell])):
            out.append((cell, name, a[cell][name], b[cell][name]))
    return out


def rel(x, y):
    return abs(y - x) / abs(x) if x else (0.0 if y == x else float("inf"))


def split_passthrough(argv):
    """(this tool's arguments, the ones after `--` that go to `harness run`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


# ---- report ---------------------------------------------------------------------------------
def main(argv=None):
    argv, extra = split_passthrough(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="pairs of sweeps (default 1)")
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "sweep-compare"))
    parser.add_argument("--tolerance", type=float, default=0.01, help="relative memory difference allowed (0.01)")
    parser.add_argument("--grain", type=float, default=256 * KiB, help="bytes of difference that are RSS grain")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    runs = []
    for index in range(args.runs):
        order = SCHEDULES if index % 2 == 0 else SCHEDULES[::-1]
        for schedule in order:
            print(f"run {index}: {schedule} ...", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]
            run = run_sweep(schedule, index, args.out, extra)
            run["load_before"] = load
            runs.append(run)
            print(f"run {index}: {schedule} {run['wall_s']:.0f} s (1-min load before {load:.1f})", file=sys.stderr)

    print("## Wall time of the sweep (seconds)\n")
    print("| run | schedule | wall s | 1-min load average before |\n|---|---|---|---|")
    for run in runs:
        print(f"| {run['index']} | {run['schedule']} | {run['wall_s']:.1f} | {run['load_before']:.1f} |")
    medians = {s: statistics.median([r["wall_s"] for r in runs if r["schedule"] == s]) for s in SCHEDULES}
    print(f"\nmedian serial {medians['serial']:.1f} s, parallel {medians['parallel']:.1f} s: "
          f"parallel / serial = {medians['parallel'] / medians['serial']:.2f}")

    print("\n## Where the time went (worker-seconds per stage, summed over passes; first run of each)\n")
    per = {}
    for schedule in SCHEDULES:
        first = next(r for r in runs if r["schedule"] == schedule)
        totals, summary, intervals = stages(first["log"])
        totals["parent alone (no pass running)"] = max(0.0, first["wall_s"] - busy_time(intervals))
        per[schedule] = totals
    names = sorted({n for t in per.values() for n in t if not n.startswith("passes:")},
                   key=lambda n: -per["serial"].get(n, 0.0))
    print("| stage | serial | parallel |\n|---|---|---|")
    for name in names:
        print(f"| {name} | {per['serial'].get(name, 0.0):.1f} | {per['parallel'].get(name, 0.0):.1f} |")

    print("\n## Memory figures, parallel vs serial\n")
    serial_runs = [r for r in runs if r["schedule"] == "serial"]
    parallel_runs = [r for r in runs if r["schedule"] == "parallel"]
    base = load_figures(serial_runs[0]["records"])
    control = {}
    if len(serial_runs) > 1:
        for cell, name, x, y in differences(base, load_figures(serial_runs[1]["records"])):
            control[(cell, name)] = (rel(x, y), abs(y - x))
    failing = 0
    for run in parallel_runs:
        diffs = differences(base, load_figures(run["records"]))
        outside = [(c, n, x, y) for c, n, x, y in diffs if rel(x, y) > args.tolerance]
        beyond_grain = [(c, n, x, y) for c, n, x, y in outside if abs(y - x) > args.grain]
        failing += len(beyond_grain)
        worst = max(diffs, key=lambda d: rel(d[2], d[3])) if diffs else None
        print(f"parallel run {run['index']}: {len(diffs)} figures of {len(base)} cells; "
              f"{len(diffs) - len(outside)} within {args.tolerance:.0%}; {len(outside)} outside, of which "
              f"{len(beyond_grain)} by more than {args.grain / KiB:.0f} KiB")
        if worst:
            print(f"  largest relative difference: {rel(worst[2], worst[3]):.2%} ({worst[1]} of {' '.join(map(str, worst[0][:2]))})")
        if outside:
            print("\n| cell | figure | serial | parallel | difference | serial vs serial |\n|---|---|---|---|---|---|")
            for cell, name, x, y in sorted(outside, key=lambda d: -rel(d[2], d[3])):
                ctl = control.get((cell, name))
                ctl_text = f"{ctl[0]:.2%} ({ctl[1] / KiB:.0f} KiB)" if ctl else "-"
                print(f"| {cell[0]} {cell[1]} | {name} | {x / KiB:.0f} KiB | {y / KiB:.0f} KiB | "
                      f"{rel(x, y):.2%} ({(y - x) / KiB:+.0f} KiB) | {ctl_text} |")
        print()
    if control:
        worst = max(control.values(), key=lambda v: v[0])
        print(f"control, serial run 0 vs serial run 1: {sum(1 for v in control.values() if v[0] > args.tolerance)} "
              f"of {len(control)} figures outside {args.tolerance:.0%}; largest {worst[0]:.2%} ({worst[1] / KiB:.0f} KiB)")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
