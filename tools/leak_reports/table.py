"""The leak reports' table (docs/leak_reports.md) from the harness's records and the independent loops.

    .venv/bin/python tools/leak_reports/table.py results/leak_reports/*.jsonl [--loops results/leak_reports/loops.jsonl]

One Markdown row per record: the step file, the release that ran and its Python, the
leak phase's verdict, `bytes_per_step` (the Theil-Sen slope of the second half), the
readings (how many; the own pages' change from the first to the last, KiB) and why the
phase stopped early where it did. With --loops, the independent loop's figures
(tools/independent/leak_loop.py: least-squares bytes a step over its steps, each half's)
for the same step, release and Python, beside it.
"""

import argparse
import json
import os
import sys


def records(paths):
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def step_name(workload):
    return os.path.basename(workload.split("#")[0])


def key(step, version, python):
    return step, version, ".".join(str(python).split(".")[:2])


def loop_index(path):
    found = {}
    if path:
        for loop in records([path]):
            version = next((v for k, v in loop["versions"].items() if k in ("torch", "tensorflow")), "")
            found.setdefault(key(loop["step_file"], version.split("+")[0], loop["python"]), []).append(loop)
    return found


def row(record, loops):
    leak = record.get("leak") or {}
    python = record["provenance"].get("python", "")
    version = record.get("framework_version") or ""
    samples = leak.get("samples") or []
    change = f"{(samples[-1] - samples[0]) / 1024:+.0f}" if len(samples) > 1 else "-"
    cells = [f"`{step_name(record['workload'])}`", f"{version} (py{'.'.join(python.split('.')[:2])})"]
    if record["status"] != "ok":
        return "| " + " | ".join(cells + [record["status"], "-", "-", (record.get("message") or "")[:120], "-"]) + " |"
    cells += [f"**{leak.get('verdict')}**", f"{leak.get('bytes_per_step', 0):,.0f}",
              f"{leak.get('readings')} ({change} KiB)", leak.get("stopped", "")]
    found = loops.get(key(step_name(record["workload"]), version.split("+")[0], python), [])
    cells.append("; ".join(f"{lp['own_bytes_per_step']:,.0f} ({lp['own_halves_per_step'][0]:,.0f}, "
                           f"{lp['own_halves_per_step'][1]:,.0f}) over {lp['steps']}" for lp in found) or "-")
    return "| " + " | ".join(cells) + " |"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+")
    parser.add_argument("--loops", help="the independent loops' JSON lines")
    args = parser.parse_args(argv)
    missing = [p for p in args.records + ([args.loops] if args.loops else []) if not os.path.exists(p)]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    loops = loop_index(args.loops)
    print("| step | release (Python) | harness verdict | bytes/step | readings (change) | stopped | "
          "independent loop: bytes/step (halves) |")
    print("|---|---|---|---|---|---|---|")
    for record in records(args.records):
        print(row(record, loops))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
