"""Where a GPU sweep's wall time went: tools/gpu_check.sh writes this next to its records.

    python tools/gpu_wall_summary.py OUT_DIR [--script-wall SECONDS]

Reads OUT_DIR/cuda.jsonl (the records) and OUT_DIR/schedule-*.jsonl (one line per pass,
`harness run --schedule-log`) and prints:

- the cells by status, and per framework, mode and size: cells ok and their mean worker
  walls (memory pass, time pass), which is what `harness run --budget` estimates from
  (tools/cuda_cost_table.py turns them into harness/sweep/budget.py's table);
- per sweep call: its wall time, the seconds its passes worked (summed), so how many ran
  at once on average, and how the CUDA memory passes ran (provenance.cuda_concurrency);
- the slowest passes, with their marks (where a 20-50 s cell spends its time).
"""

import argparse
import glob
import json
import os
import statistics
import sys

from harness import results


def summarize(out_dir, script_wall=None):
    lines = []
    path = os.path.join(out_dir, "cuda.jsonl")
    records = results.read_records(path) if os.path.exists(path) else []
    newest = {}
    for record in records:
        newest[tuple(record.get(k) for k in results.CELL_KEYS) + (record.get("optimizer"),)] = record
    records = list(newest.values())
    if script_wall is not None:
        lines.append(f"script wall: {script_wall:.0f} s (install, sweep, page)")
    statuses = {}
    for record in records:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    lines.append(f"cells recorded: {len(records)} ({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))})")

    groups = {}
    for record in records:
        walls = (record.get("provenance") or {}).get("worker_wall_s") or {}
        if record["status"] == "ok" and walls.get("time") is not None:
            key = (record["framework"], record["mode"], record["size"])
            groups.setdefault(key, []).append((walls["memory"], walls["time"]))
    if groups:
        lines.append("ok cells per framework/mode/size: count, mean memory-pass wall s, mean time-pass wall s")
        for key in sorted(groups):
            rows = groups[key]
            lines.append(f"  {' '.join(key):32s} {len(rows):3d}  {statistics.fmean(m for m, _ in rows):6.1f}"
                         f"  {statistics.fmean(t for _, t in rows):6.1f}")

    sharing = {}
    for record in records:
        note = (record.get("provenance") or {}).get("cuda_concurrency")
        if note:
            sharing[note["memory_pass"]] = sharing.get(note["memory_pass"], 0) + 1
    if sharing:
        lines.append("CUDA memory passes: " + ", ".join(f"{n} {how}" for how, n in sorted(sharing.items())))
        reasons = {(r.get("provenance") or {}).get("cuda_concurrency", {}).get("reason") for r in records} - {None}
        lines.extend(f"  - {reason}" for reason in sorted(reasons))

    slowest = []
    for log in sorted(glob.glob(os.path.join(out_dir, "schedule-*.jsonl")), key=_call_number):
        passes, sweep = [], None
        with open(log, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed sweep
                if "sweep" in entry:
                    sweep = entry["sweep"]
                else:
                    passes.append(entry)
        worked = sum(p["ended_s"] - p["started_s"] for p in passes)
        wall = sweep["wall_s"] if sweep else max((p["ended_s"] for p in passes), default=0.0)
        kinds = {}
        for entry in passes:
            kinds[entry["pass"]] = kinds.get(entry["pass"], 0.0) + entry["ended_s"] - entry["started_s"]
        lines.append(
            f"{os.path.basename(log)}: sweep wall {wall:.0f} s, {len(passes)} passes working {worked:.0f} s "
            f"({worked / wall if wall else 0:.1f} at once on average; "
            + ", ".join(f"{kind} {seconds:.0f} s" for kind, seconds in sorted(kinds.items())) + ")"
            + ("" if sweep else " [no end line: the sweep was stopped]")
        )
        stopped = sum(1 for p in passes if p.get("status") == "stopped")
        if stopped:
            lines.append(f"  {stopped} pass(es) stopped in the budget's endgame (their cells left for --resume)")
        slowest.extend(passes)
    slowest.sort(key=lambda p: p["ended_s"] - p["started_s"], reverse=True)
    if slowest:
        lines.append("slowest passes (wall s: marks at s from the pass's start)")
        for entry in slowest[:8]:
            marks = " ".join(f"{name}@{t:.1f}" for t, name in entry["marks"])
            if entry.get("status") == "stopped":
                marks = "stopped in the budget's endgame"
            lines.append(f"  {entry['ended_s'] - entry['started_s']:6.1f}  {entry['pass']:18s} {entry['cell']}: {marks}")
    return lines


def _call_number(path):
    stem = os.path.basename(path)[len("schedule-"):-len(".jsonl")]
    return int(stem) if stem.isdigit() else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--script-wall", type=float, default=None)
    args = parser.parse_args(argv)
    print("\n".join(summarize(args.out_dir, args.script_wall)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
