#!/usr/bin/env python
"""Does a printed time hold when another process takes a CPU? Quiet vs loaded, per cell.

    .venv/bin/python tools/load_check.py                       # chained_dot, shared_linear x torch, jax, reference
    .venv/bin/python tools/load_check.py --pairs 2 --threads 1 -- --dtype float64

Runs the cells with `python -m harness run` twice: quiet, then with a planted
competing load (one busy-looping process pinned to CPU 0) for the whole sweep; with
--pairs 2 the order alternates. For each cell it prints the figure the table prints
(the median step time, "~" when marked noisy, and its interquartile range), the
loaded / quiet ratio, the CPUs other processes used during the timed steps, and a
verdict:

- ``holds``: the loaded figure is not marked noisy and within 15 % of the quiet one;
- ``marked noisy``: the loaded figure carries the noisy mark (advisory, not compared);
- ``FAIL``: the loaded figure is unmarked and off by more than 15 %;
- ``quiet run noisy``: the quiet run itself was contended (the machine was not quiet:
  nothing to compare against; run again at a quiet moment).

Exit 1 when any cell FAILs. Arguments after `--` go to `harness run` (e.g. --size).
"""

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile

from sweep_compare import split_passthrough  # noqa: E402 (tools/ is this script's directory)
from harness.sweep import outcome  # noqa: E402  (sweep_compare put the checkout on the path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = 0.15
BUSY_LOOP = "while True:\n    pass\n"


@contextlib.contextmanager
def competing_load(cpu=0):
    """One process spinning on `cpu` (pinned) for as long as the block runs."""
    def pin():
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu})

    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP], preexec_fn=pin, start_new_session=True)
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def sweep(out, extra):
    """Records of one `harness run` (a list of dicts)."""
    if os.path.exists(out):
        os.remove(out)
    done = subprocess.run([sys.executable, "-m", "harness", "run", *extra, "--quiet", "--out", out],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode not in outcome.RAN_TO_THE_END:  # a failed cell is a record
        raise SystemExit(f"harness run failed ({done.returncode}):\n{done.stdout[-3000:]}")
    with open(out, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def key(record):
    return (record["workload"], record["framework"], record["mode"], record["size"], record["dtype"])


def figure(record):
    """(median s, noisy, other processes' CPUs, IQR s) of an ok record, else None."""
    if record.get("status") != "ok":
        return None
    stats = record.get("time_stats") or {}
    iqr = (record.get("time_spread_s") or {}).get("total")
    return record["time_s"]["total"], bool(record.get("time_noisy")), stats.get("others_cpus"), iqr


def verdict(quiet, loaded, tolerance=TOLERANCE):
    """The verdict of one quiet/loaded pair of figures (see the module's doc)."""
    if quiet is None or loaded is None:
        return "did not run"
    if quiet[1]:
        return "quiet run noisy"
    if loaded[1]:
        return "marked noisy"
    return "holds" if abs(loaded[0] / quiet[0] - 1.0) <= tolerance else "FAIL"


def main(argv=None):
    argv, extra = split_passthrough(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="chained_dot,shared_linear")
    parser.add_argument("--frameworks", default="torch,jax,reference")
    parser.add_argument("--size", default="small")
    parser.add_argument("--threads", default=None, help="--threads of harness run (default: its default)")
    parser.add_argument("--pairs", type=int, default=1, help="quiet/loaded pairs (default 1)")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU the planted load spins on (default 0)")
    args = parser.parse_args(argv)
    command = ["--workload", args.workloads, "--framework", args.frameworks, "--size", args.size,
               *(["--threads", args.threads] if args.threads else []), *extra]

    rows = []
    with tempfile.TemporaryDirectory(prefix="gradmem-load-") as tmp:
        for pair in range(args.pairs):
            found = {}
            for condition in (("quiet", "loaded") if pair % 2 == 0 else ("loaded", "quiet")):
                print(f"pair {pair}: {condition} ...", file=sys.stderr, flush=True)
                out = os.path.join(tmp, f"{condition}-{pair}.jsonl")
                if condition == "loaded":
                    with competing_load(args.cpu):
                        found[condition] = sweep(out, command)
                else:
                    found[condition] = sweep(out, command)
            loaded = {key(r): r for r in found["loaded"]}
            for record in found["quiet"]:
                q, l = figure(record), figure(loaded.get(key(record), {}))
                rows.append((pair, key(record), q, l, verdict(q, l)))

    print("| pair | cell | quiet s (IQR) | loaded s (IQR) | loaded / quiet | other CPUs quiet / loaded | verdict |")
    print("|---|---|---|---|---|---|---|")
    for pair, cell, q, l, word in rows:
        def fmt(f):
            if f is None:
                return "-"
            iqr = "" if f[3] is None else f" ({f[3]:.4f})"
            return f"{f[0]:.4f}{'~' if f[1] else ''}{iqr}"

        def cpus(f):
            return "-" if f is None or f[2] is None else f"{f[2]:.2f}"

        ratio = f"{l[0] / q[0]:.2f}" if q and l else "-"
        print(f"| {pair} | {' '.join(cell)} | {fmt(q)} | {fmt(l)} | {ratio} | {cpus(q)} / {cpus(l)} | {word} |")
    print("\n~ = marked noisy. Tolerance for 'holds': "
          f"{TOLERANCE:.0%}. Planted load: one busy loop pinned to CPU {args.cpu}.")
    return 1 if any(word == "FAIL" for *_, word in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
