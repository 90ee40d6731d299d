"""What a built-in cell's step keeps per step: the gc-tracked objects and own pages it adds.

    .venv/bin/python tools/leak_reports/what_grows_cell.py FRAMEWORK WORKLOAD [SIZE] [--steps N] [--mode M]

The cell is prepared as a memory pass prepares it (the worker's own preparation, the
framework's buffer cache off), in this process; 3 unread steps, then the objects the
garbage collector tracks are counted by type, N more steps run (default 20), and they
are counted again. One JSON line: the own pages (RssAnon + RssShmem) added per step, and
the types of which at least one object a step was added. The leak phase says how many
bytes a step keeps (docs/measurement.md, "Memory that grows"); this says which Python
objects, where there are any (none: what grows is no Python object, e.g. a C++ cache).
tools/leak_reports/what_grows.py does the same for a native step file.
"""

import argparse
import collections
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from harness import choices  # noqa: E402
from harness.measure import probes, worker  # noqa: E402
from harness.measure.marks import Marks  # noqa: E402
from harness.measure.phases import NullMeter  # noqa: E402

UNREAD_STEPS = 3


def counts():
    gc.collect()
    return collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())


def own_bytes():
    """The process's own pages, read as the leak phase reads them: settled first (gc, then
    malloc_trim), so heap glibc keeps free is not read as kept (torch 2.1's compiled
    transformer_block read 2.8 MB a step untrimmed, 61-111 KiB trimmed; its leak phase 61-71)."""
    probes.settle()
    return worker._own_memory_reader(None)()  # the leak phase's own reader on the host


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework")
    parser.add_argument("workload")
    parser.add_argument("size", nargs="?", default="small")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--mode", choices=choices.MODES, default="eager", help="the cell's mode (default eager)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    job = {"kind": "memory", "cell": {"workload": args.workload, "size": args.size, "dtype": "float32",
                                      "framework": args.framework, "mode": args.mode, "device": "cpu"},
           "seed": 0, "warmup": 1, "predict": False}
    adapter, _, step, _ = worker._prepare(job, Marks(None))
    adapter.buffer_cache_off()  # as the memory pass
    for _ in range(UNREAD_STEPS):
        step.run(NullMeter())
    before, own_before = counts(), own_bytes()
    for _ in range(args.steps):
        step.run(NullMeter())
    after, own_after = counts(), own_bytes()
    added = {name: (after[name] - before[name]) / args.steps for name in after
             if after[name] - before[name] >= args.steps}
    print(json.dumps({"cell": f"{args.framework} {args.workload} {args.size} {args.mode}", "steps": args.steps,
                      "own_bytes_per_step": (own_after - own_before) / args.steps,
                      "objects_per_step": dict(sorted(added.items(), key=lambda kv: -kv[1])[:15])}))


if __name__ == "__main__":
    main()
