"""The leak phase's power and false positives on planted leaks, with the sweep's budgets.

    .venv/bin/python tools/leak_reports/power.py [--runs 10]

The files of tests/measure/test_leak.py (an op-set workload on the reference engine and
a native autograd step, each keeping 0, 16 KiB, 256 KiB or 4 MiB of written pages every
step), each measured --runs times by a fresh memory-pass worker as a sweep runs it, with
the sweep's own leak budgets (the test gives them larger ones). One JSON line per file and
size: the verdicts counted, growth per step over the planted size, readings, wall.
"""

import argparse
import json
import pathlib
import sys
import tempfile
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "measure")]

import test_leak as planted  # noqa: E402  the planted files, written once there

from harness import frameworks  # noqa: E402
from harness.sweep import environment  # noqa: E402
from harness.sweep.worker_process import run_worker  # noqa: E402
from harness.workloads import loader  # noqa: E402

SIZES = (0, 16 * 1024, 256 * 1024, 4 * 1024 * 1024)


def measure(tmp, kind, leak_bytes):
    source, framework = (planted.OP_SET, "reference") if kind == "op-set" else (planted.NATIVE, "autograd")
    path = pathlib.Path(tmp) / f"{kind.replace('-', '_')}_{leak_bytes}.py"
    path.write_text(source.format(leak=leak_bytes))
    cell = {"workload": loader.canonical(str(path)), "size": "tiny", "dtype": "float32", "framework": framework,
            "mode": "eager", "device": "cpu"}
    env, _ = environment.worker_environment(frameworks.get(framework), "memory")
    job = {"kind": "memory", "cell": cell, "seed": 0, "warmup": 1, "predict": False}  # the sweep's budgets
    outcome = run_worker(job, env, str(tmp), path.stem, timeout_s=300)
    return outcome.result["leak"] if outcome.ok else {"verdict": f"error: {outcome.message[:120]}"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    for kind in ("op-set", "native"):
        for size in SIZES:
            found = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    found.append(measure(tmp, kind, size))
            print(json.dumps({
                "kind": kind, "planted_bytes": size, "verdicts": dict(Counter(f["verdict"] for f in found)),
                # planted: growth per step over the planted size; none planted: bytes per step
                "growth": [round(f.get("bytes_per_step", 0) / size, 3) if size else f.get("bytes_per_step", 0)
                           for f in found],
                "readings": [f.get("readings") for f in found],
                "wall_s": [round(f.get("wall_s", 0), 2) for f in found],
            }), flush=True)


if __name__ == "__main__":
    main()
