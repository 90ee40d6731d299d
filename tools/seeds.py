#!/usr/bin/env python
"""Regenerate the figures of one section of docs/seeds.md (the reports gradmem's
workloads come from, each claim measured today).

    .venv/bin/python tools/seeds.py autograd219 --repo CHECKOUT_OF_HIPS_AUTOGRAD
    .venv/bin/python tools/seeds.py pr4746

autograd219: `harness bisect --repo` over autograd's first-parent commits from
3d018e8 (the thread's master, 5 May 2017) to 723e677 (11 July 2017), walked step by
step (after each first-bad commit the bisection starts again from it, until good and
bad no longer differ), then a memory pass of each step's two commits whose breakdown
names the category that moved. pr4746: shared_linear in the reference engine under
each backward order, and the rows above the bound, each with its RSS timeline read at
the phase marks (what is live when backward starts, and its peak).

Exit 2 for a bad section name or argument.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT)

MIB = 1024 * 1024
PYTHON = sys.executable
AUTOGRAD_GOOD, AUTOGRAD_BAD = "3d018e8", "723e677"  # 5 May 2017 .. 11 July 2017


def _bisect(repo, workload, size, good, bad, metric):
    """(exit code, {first_bad, last_good, good_mib, bad_mib}, output) of one bisection."""
    command = [PYTHON, "-m", "harness", "bisect", "--workload", workload, "--framework", "autograd",
               "--repo", repo, "--good", good, "--bad", bad, "--size", size, "--metric", metric]
    done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
    text = done.stdout + done.stderr
    found = {}
    for key, pattern in (("first_bad", r"first bad commit: (\w+)"), ("last_good", r"last good commit: (\w+)")):
        match = re.search(pattern, text)
        if match:
            found[key] = match.group(1)
    match = re.search(r"good ([\d.]+) MiB -> bad ([\d.]+) MiB", text)
    if match:
        found["good_mib"], found["bad_mib"] = float(match.group(1)), float(match.group(2))
    return done.returncode, found, text


def walk_steps(repo, workload, size, good, bad, metric="backward"):
    """Every commit that moved `metric` by more than bisect's threshold, oldest first."""
    steps = []
    while True:
        code, found, text = _bisect(repo, workload, size, good, bad, metric)
        print(text.rstrip(), flush=True)
        if code == 1:  # good and bad no longer differ: no step left
            return steps
        if code != 0 or "first_bad" not in found:
            raise RuntimeError(f"bisect exited {code}:\n{text[-2000:]}")
        steps.append(found)
        good = found["first_bad"]


def breakdown(repo, commit, workload, size, dtype="float32"):
    """The memory pass of `commit` (its own environment): step peaks and breakdown."""
    from harness import frameworks
    from harness.measure import environment
    from harness.measure.runner import run_worker
    from harness.versions import commits, envs

    adapter = frameworks.get("autograd")
    full = commits.resolve(repo, commit, "commit")
    env_ = commits.environment(adapter, repo, full)
    cell = {"workload": workload, "size": size, "dtype": dtype, "framework": "autograd", "mode": "eager",
            "device": "cpu", "optimizer": None, "remat": "none", "order": None}
    job = {"cell": cell, "seed": 0, "optimizer": None, "lr": 1e-3, "warmup": 1, "repeat": 3, "memory_limit": None,
           "kind": "memory", "tracemalloc": False, "reference_gradient_path": None}
    with tempfile.TemporaryDirectory(prefix="gradmem-seeds-") as work:
        env, _ = environment.worker_environment(adapter, "memory")
        env = envs.worker_environment(env, work, env_.paths)
        outcome = run_worker(job, env, work, "seed-memory", 900, python=env_.python)
    if not outcome.ok:
        raise RuntimeError(f"{commit}: memory pass {outcome.status}: {outcome.message}")
    return outcome.result


def section_autograd219(args):
    for workload in args.workloads.split(","):
        print(f"== {workload} {args.size}: steps of the backward step peak, {AUTOGRAD_GOOD}..{AUTOGRAD_BAD}", flush=True)
        steps = walk_steps(args.repo, workload, args.size, AUTOGRAD_GOOD, AUTOGRAD_BAD)
        for step in steps:
            before = breakdown(args.repo, step["last_good"], workload, args.size)
            after = breakdown(args.repo, step["first_bad"], workload, args.size)
            print(f"-- step at {step['first_bad'][:12]} (after {step['last_good'][:12]}); the bisected range's "
                  f"ends: {step['good_mib']:.2f} -> {step['bad_mib']:.2f} MiB backward step peak", flush=True)
            rows = [("peak forward", before["peak_bytes"].get("forward"), after["peak_bytes"].get("forward")),
                    ("peak backward", before["peak_bytes"].get("backward"), after["peak_bytes"].get("backward"))]
            moved = []
            for name in ("saved_activations", "gradients", "temporaries"):
                a, b = (before["breakdown_bytes"] or {}).get(name), (after["breakdown_bytes"] or {}).get(name)
                rows.append((name, a, b))
                if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                    moved.append((abs(b - a), name, a, b))
            for name, a, b in rows:
                print(f"   {name:<18} {_mib(a):>10} -> {_mib(b):>10}", flush=True)
            if moved:
                _, name, a, b = max(moved)
                print(f"   category that moved most: {name} ({_mib(a)} -> {_mib(b)} MiB)", flush=True)
            print(f"   bound (store-everything) {_mib(after.get('bound_bytes'))} MiB", flush=True)
    return 0


def section_pr4746(args):
    """shared_linear: the reference engine's three orders and the given frameworks, each
    with what its RSS timeline says is live when backward starts and its backward peak."""
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="gradmem-seeds-"), "pr4746.jsonl")
    command = [PYTHON, "-m", "harness", "run", "--workload", "shared_linear", "--framework",
               "reference," + args.frameworks, "--size", args.size, "--dtype", "float32",
               "--order", "heap,bfs,dfs", "--repeat", "3", "--quiet", "--out", out]
    if subprocess.run(command, cwd=PROJECT).returncode not in (0, 1):
        return 1
    for record in _records(out):
        print(_timeline_line(record), flush=True)
    return 0


def _records(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def timeline_at_marks(record):
    """{mark: RSS above the timeline's first sample, MiB} at each phase mark of the
    steady step, and the maximum between the backward mark and the next one."""
    timeline = record.get("timeline") or {}
    t, rss, marks = timeline.get("t") or [], timeline.get("rss") or [], timeline.get("marks") or []
    if not t:
        return {}
    base = rss[0]
    found = {}
    for i, mark in enumerate(marks):
        name, at = (mark.get("name"), mark.get("t")) if isinstance(mark, dict) else (mark[0], mark[1])
        following = [m for m in marks[i + 1:]]
        end = (following[0].get("t") if following and isinstance(following[0], dict)
               else following[0][1] if following else t[-1])
        inside = [r for x, r in zip(t, rss) if at <= x <= end]
        found[name] = ((inside[0] - base) / MIB if inside else None, (max(inside) - base) / MIB if inside else None)
    return found


def _timeline_line(record):
    cell = record.get("cell", record)
    peaks = record.get("peak_bytes") or {}
    bound = record.get("bound_bytes")
    label = f"{cell.get('framework')}" + (f" order={cell.get('order')}" if cell.get("order") else "")
    text = (f"{label:<22} status={record.get('status')} forward {_mib(peaks.get('forward'))} "
            f"backward {_mib(peaks.get('backward'))} total {_mib(peaks.get('total'))} MiB, "
            f"bound {_mib(bound)} MiB")
    breakdown_ = record.get("breakdown_bytes") or {}
    text += " | breakdown: " + ", ".join(f"{k} {_mib(breakdown_.get(k))}"
                                         for k in ("saved_activations", "gradients", "temporaries"))
    return text


def _mib(value):
    return f"{value / MIB:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


SECTIONS = {"autograd219": section_autograd219, "pr4746": section_pr4746}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("section", help=f"one of {', '.join(SECTIONS)}")
    parser.add_argument("--repo", default=None, help="autograd219: a git checkout (or mirror) of HIPS/autograd")
    parser.add_argument("--workloads", default="rnn_fanout,chained_dot", help="autograd219: workloads (default both)")
    parser.add_argument("--size", default="small", help="tiny|small|paper (default small)")
    parser.add_argument("--frameworks", default="torch,tensorflow,pytensor,paddle",
                        help="pr4746: the rows beside the reference engine")
    parser.add_argument("--out", default=None, help="pr4746: keep the records in this JSONL file")
    return parser.parse_args(argv)


def check(args):
    from harness import choices, workloads

    choices.check_choice("section", args.section, tuple(SECTIONS))
    choices.check_choice("size", args.size, choices.SIZES)
    choices.parse_choices("workload", args.workloads, workloads.NAMES)
    if args.section == "autograd219" and not args.repo:
        raise choices.ChoiceError("autograd219 needs --repo: a git checkout of HIPS/autograd (its 2017 history)")


def main(argv=None):
    args = parse_args(argv)
    from harness import choices

    try:
        check(args)
    except choices.ChoiceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return SECTIONS[args.section](args)


if __name__ == "__main__":
    sys.exit(main())
