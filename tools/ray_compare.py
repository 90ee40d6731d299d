#!/usr/bin/env python
"""One sweep locally and on a two-node Ray cluster started on this machine, side by side.

    .venv/bin/python tools/ray_compare.py                       # docs/ray.md's figures
    .venv/bin/python tools/ray_compare.py -- --workload unet --size tiny

Runs `python -m harness run` (default: unet,tiny_nerf,shared_linear x
reference,torch,autograd at small, 9 cells; arguments after `--` replace these) four
times, one after the other: local serial, local parallel (--jobs 2), then on a Ray
cluster of two "nodes" on this machine (ray.cluster_utils.Cluster: a head and a second
node, one CPU and one gradmem_node each, 100 MB object stores) with the Ray default
(parallel) and with --schedule serial. Printed: each run's wall time, the seconds
before its first pass started (Ray: connecting), and the overhead per pass and per
cell of the serial runs from their --schedule-log (gap between one pass's end and the
next one's start, plus a pass's span beyond its worker's own wall time), medians; then
every ok cell's step peak and footprint, local serial against Ray parallel.
Files go to --out (default out/ray-compare/).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness import figures  # noqa: E402  (the checkout's harness, as the script runs it)
from harness.sweep import outcome  # noqa: E402
from harness.units import MIB as MiB  # noqa: E402

CELLS = ["--workload", "unet,tiny_nerf,shared_linear", "--framework", "reference,torch,autograd", "--size", "small"]
NODE = {"num_cpus": 1, "resources": {"gradmem_node": 1}, "object_store_memory": 100 * 1024**2}


def sweep(out, name, cells, *extra):
    records, log = os.path.join(out, f"{name}.jsonl"), os.path.join(out, f"{name}.log")
    for path in (records, log):
        if os.path.exists(path):
            os.remove(path)
    cmd = [sys.executable, "-m", "harness", "run", *cells, "--out", records, "--schedule-log", log, "--quiet", *extra]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode not in outcome.RAN_TO_THE_END:  # a failed cell is a record
        sys.exit(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    print(f"{name:16s} wall {wall:7.1f} s", flush=True)
    return records, log


def overheads(log):
    """(seconds before the first pass, [overhead per pass], {cell: overhead})."""
    lines = [json.loads(line) for line in open(log, encoding="utf-8")]
    passes = sorted((line for line in lines if "pass" in line), key=lambda line: line["started_s"])
    per_pass, per_cell, previous = [], {}, None
    for item in passes:
        gap = 0.0 if previous is None else item["started_s"] - previous
        spent = gap + item["ended_s"] - item["started_s"] - item["worker_s"]
        per_pass.append(spent)
        per_cell[item["cell"]] = per_cell.get(item["cell"], 0.0) + spent
        previous = item["ended_s"]
    return passes[0]["started_s"], per_pass[1:], per_cell


def compare(local, remote):
    def load(path):
        return {(r["workload"], r["framework"]): r for r in map(json.loads, open(path, encoding="utf-8"))}

    mine, theirs = load(local), load(remote)
    print("\nstep peak and footprint (MiB), local serial vs Ray parallel:")
    for key in sorted(mine):
        a, b = mine[key], theirs.get(key)
        if b is None or a["status"] != "ok" or b["status"] != "ok":
            print(f"  {key[0]:16s} {key[1]:10s} {a['status']} / {b['status'] if b else 'missing'}")
            continue
        line = f"  {key[0]:16s} {key[1]:10s}"
        for figure in ("step_peak", "footprint"):
            x, y = figures.value(a, figure), figures.value(b, figure)
            line += f"  {figure.split('_')[0]} {x / MiB:7.2f} {y / MiB:7.2f} ({100 * (y / x - 1):+5.1f} %)"
        print(line)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "ray-compare"))
    parser.add_argument("cells", nargs="*", help="after --: harness run arguments replacing the default cells")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cells = args.cells or CELLS
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray.cluster_utils import Cluster

    runs = {"local-serial": sweep(args.out, "local-serial", cells)}
    runs["local-parallel"] = sweep(args.out, "local-parallel", cells, "--schedule", "parallel", "--jobs", "2")
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args=dict(NODE, include_dashboard=False))
    try:
        cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        print(f"two-node cluster up in {time.monotonic() - started:.1f} s (not counted in the walls)")
        on_ray = ("--executor", "ray", "--address", cluster.address)
        runs["ray-parallel"] = sweep(args.out, "ray-parallel", cells, *on_ray)
        runs["ray-serial"] = sweep(args.out, "ray-serial", cells, *on_ray, "--schedule", "serial")
    finally:
        cluster.shutdown()
    print("\noverhead, serial schedule (what is not the workers' own wall time):")
    for name in ("local-serial", "ray-serial"):
        first, per_pass, per_cell = overheads(runs[name][1])
        print(f"  {name:13s} first pass at {first:5.2f} s; per pass median {statistics.median(per_pass) * 1e3:6.1f} ms "
              f"(max {max(per_pass):.2f} s); per cell median {statistics.median(per_cell.values()) * 1e3:6.1f} ms")
    compare(runs["local-serial"][0], runs["ray-parallel"][0])


if __name__ == "__main__":
    main()
