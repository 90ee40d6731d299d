#!/usr/bin/env python
"""Markdown tables of the memory figures of result files (for docs).

    python tools/memory_tables.py table out/cpu-small.jsonl
        one row per ok cell: step peak, retained (anon / file), footprint, and the
        breakdown (saved activations, gradients, optimizer state, temporaries, params)
    python tools/memory_tables.py repeat a.jsonl b.jsonl c.jsonl [--names ...]
        per cell, the step peak and retained of each sweep, the step peak's median, their
        spread (max - min) and whether it is within 2 % or 256 KiB (whichever is larger):
        the repeatability criterion

Cells are matched on (workload, framework, mode, size, dtype, device, optimizer, remat,
order); the last record of a cell in a file wins (as on the report page).
"""

import argparse
import statistics
import sys

from harness import figures, results
from harness.units import MIB

CELL = ("workload", "framework", "mode", "size", "dtype", "device", "optimizer", "remat", "order")


def cells(path):
    found = {}
    for record in results.read_records(path):
        if record.get("status") == "ok" and record.get("schema") == results.SCHEMA:
            found[tuple(record.get(k) for k in CELL)] = record
    return found


def mib(value):
    return "–" if value is None else f"{value / MIB:.2f}"


def table(path):
    print("| workload | framework | optimizer | step peak | retained (anon / file) | footprint | saved act. "
          "| gradients | opt. state | temporaries | params | saved method |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, r in cells(path).items():
        b, m = r["breakdown_bytes"], r["breakdown_method"]
        detail = r.get("retained_detail_bytes") or {}
        how = m["saved_activations"].split(":")[0] if b["saved_activations"] is not None else m["saved_activations"]
        print(f"| {r['workload']} | {r['framework']} | {r['optimizer'] or '–'} | {mib(figures.value(r, 'step_peak'))} "
              f"| {mib(figures.value(r, 'retained'))} ({mib(detail.get('anon'))} / {mib(detail.get('file'))}) "
              f"| {mib(figures.value(r, 'footprint'))} | {mib(b['saved_activations'])} | {mib(b['gradients'])} "
              f"| {mib(b['optimizer_state'])} | {mib(b['temporaries'])} | {mib(b['params'])} | {how[:40]} |")


def within(values):
    spread = max(values) - min(values)
    return spread, spread <= max(0.02 * max(values), 256 * 1024)


def repeat(paths, names):
    runs = [cells(p) for p in paths]
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    head = " / ".join(names)
    print(f"| workload | framework | step peak MiB ({head}) | median | spread | ok | retained MiB ({head}) | spread "
          "| ok |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for key in keys:
        peaks = [figures.value(r[key], "step_peak") for r in runs]
        kept = [figures.value(r[key], "retained") for r in runs]
        (ps, pok), (rs, rok) = within(peaks), within(kept)
        failed += (not pok) + (not rok)
        print(f"| {key[0]} | {key[1]}{' ' + key[6] if key[6] else ''} | {' / '.join(mib(v) for v in peaks)} "
              f"| {mib(statistics.median(peaks))} | {ps / 1024:.0f} KiB ({ps / statistics.median(peaks):.1%}) "
              f"| {'yes' if pok else 'NO'} | {' / '.join(mib(v) for v in kept)} "
              f"| {rs / 1024:.0f} KiB | {'yes' if rok else 'NO'} |")
    print(f"\n{len(keys)} cells in every file; {failed} figure(s) outside 2 % or 256 KiB")
    return failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("table")
    one.add_argument("file")
    many = sub.add_parser("repeat")
    many.add_argument("files", nargs="+")
    many.add_argument("--names", help="comma list naming the files' sweeps")
    args = parser.parse_args(argv)
    if args.command == "table":
        table(args.file)
        return 0
    names = args.names.split(",") if args.names else [str(i + 1) for i in range(len(args.files))]
    return 1 if repeat(args.files, names) else 0


if __name__ == "__main__":
    sys.exit(main())
