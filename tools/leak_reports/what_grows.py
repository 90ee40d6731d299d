"""What a growing native step keeps: the Python objects alive after N more steps.

    ENV_PYTHON tools/leak_reports/what_grows.py STEP.py [SIZE] [--steps N] [--warmup W]

Imports the step file (nothing of `harness`), runs `setup` and W steps, counts the
objects the garbage collector tracks by type (tensors by type and shape), runs N more
steps and counts again. Prints one JSON line: the counts that changed, per step, and
for the tensor shape that grew most, how many gc-tracked objects refer to one of its
tensors (none: what holds them is not a Python object, a reference kept in C++).
A leak of the framework's own memory that is no Python object (an allocator pool, a
C++ cache) shows here as nothing: the harness's growth figure is the bytes, this says
which objects, where there are any.
"""

import argparse
import collections
import gc
import importlib.util
import json
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("what_grows_step", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def key_of(obj):
    """A type's name; a tensor's with its shape (torch, TensorFlow: anything with a tuple-able .shape)."""
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if "Tensor" in type(obj).__name__ or "EagerTensor" in type(obj).__name__:
        try:
            return f"{name}{tuple(obj.shape)}"
        except Exception:  # noqa: BLE001 - a tensor without a readable shape is counted by type
            return name
    return name


def census():
    gc.collect()
    return collections.Counter(key_of(o) for o in gc.get_objects())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step")
    parser.add_argument("size", nargs="?", default="small")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    module = load(args.step)
    if args.size not in module.SIZES:
        print(f"error: {args.step} has no size {args.size!r}; its sizes: {', '.join(module.SIZES)}", file=sys.stderr)
        raise SystemExit(2)
    if args.steps < 1 or args.warmup < 0:
        print("error: --steps takes 1 or more, --warmup 0 or more", file=sys.stderr)
        raise SystemExit(2)
    state = module.setup(dict(module.SIZES[args.size], device="cpu", dtype="float32"))
    for _ in range(args.warmup):
        module.step(state)
    before = census()
    for _ in range(args.steps):
        module.step(state)
    after = census()
    changed = {k: after[k] - before[k] for k in set(before) | set(after) if after[k] != before[k]}
    top = sorted(changed.items(), key=lambda item: -item[1])[:12]
    found = {"steps": args.steps, "objects_per_step": round(sum(changed.values()) / args.steps, 3),
             "changed_per_step": {k: round(v / args.steps, 3) for k, v in top}}
    grown = [k for k, v in top if v > 0 and "(" in k]
    if grown:
        shape_key = grown[0]
        holders = [o for o in gc.get_objects() if key_of(o) == shape_key]
        one = holders[len(holders) // 2]
        del holders
        # the referrers of one such tensor other than this frame's own references
        found["grown_tensor"] = shape_key
        found["gc_referrers_of_one"] = sum(1 for r in gc.get_referrers(one) if r is not sys._getframe())
    print(json.dumps(found))


if __name__ == "__main__":
    main()
