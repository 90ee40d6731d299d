"""A native step run in a plain loop, its own memory read before every step: growth per step without the harness.

    ENV_PYTHON tools/independent/leak_loop.py STEP.py [SIZE] [--steps N] [--warmup W] [--threads T]

STEP.py is a native step (FRAMEWORK, SIZES, setup(cfg), step(state), optionally
sync(state): docs/workloads.md), imported here with importlib; nothing of `harness` is.
Run it with the interpreter of the environment whose release it measures (e.g.
~/.cache/gradmem/envs/torch-2.6.0-py3.11/bin/python). The recipe, written apart from
harness/measure/leak.py:

1. the environment of docs/measurement.md (steady.py: MALLOC_MMAP_THRESHOLD_=32768, 2
   threads, or T with --threads, as the harness's --threads), set before the
   interpreter starts; torch's intra/inter-op threads set to the same;
2. ``setup(cfg)`` with the size's config, device "cpu", dtype "float32";
3. W unread steps (default 3: compiling, first kernels, caches filled), then
   ``gc.freeze()`` (what lives then is left out of later collections, so each costs
   milliseconds);
4. N steps, each after ``gc.collect()`` + ``malloc_trim(0)``, with RssAnon + RssShmem
   (the process's own pages) and VmRSS read from /proc/self/status at its start.

The figures are least-squares slopes (bytes per step) of the own pages against the
step over the whole run and over each half, the last reading minus the first, and the
readings themselves. One JSON line on stdout.
"""

import argparse
import ctypes
import gc
import importlib.util
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steady  # noqa: E402  (the environment of the recipe: steady.ENVIRONMENT)


def _threads_asked(argv):
    """--threads T from the command line, read before argparse: the environment it sets
    must be in place before the interpreter starts (steady.ensure_environment re-executes)."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return None


THREADS = _threads_asked(sys.argv[1:]) or steady.THREADS
if not THREADS.isdigit() or int(THREADS) < 1:
    print(f"error: --threads takes a whole number of 1 or more, not {THREADS!r}", file=sys.stderr)
    raise SystemExit(2)
for key in list(steady.ENVIRONMENT):
    if key.endswith("THREADS") or key == "PJRT_NPROC":
        steady.ENVIRONMENT[key] = THREADS
steady.ensure_environment()

_libc = ctypes.CDLL("libc.so.6")


def status():
    """{VmRSS, RssAnon, RssShmem} of this process, bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        text = handle.read()
    return {key: int(kb) * 1024 for key, kb in re.findall(r"^(VmRSS|RssAnon|RssShmem):\s+(\d+) kB", text, re.M)}


def load(path):
    spec = importlib.util.spec_from_file_location("independent_leak_step", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slope(ys):
    """Least-squares bytes per step of `ys` (one reading a step); 0.0 for fewer than 2."""
    n = len(ys)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in range(n))
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(ys)) / sxx


def run(module, cfg, steps, warmup):
    if module.FRAMEWORK == "torch":
        import torch

        torch.set_num_threads(int(THREADS))
        torch.set_num_interop_threads(int(THREADS))
    state = module.setup(cfg)

    def one_step():
        module.step(state)
        if hasattr(module, "sync"):
            module.sync(state)

    started = time.monotonic()
    for _ in range(warmup):
        one_step()
    warm_s = time.monotonic() - started
    gc.collect()
    gc.freeze()  # what lives now is left out of later collections: each one walks what the steps made
    own, rss = [], []
    started = time.monotonic()
    for _ in range(steps):
        gc.collect()
        _libc.malloc_trim(0)
        found = status()
        own.append(found["RssAnon"] + found.get("RssShmem", 0))
        rss.append(found["VmRSS"])
        one_step()
    half = len(own) // 2
    return {
        "steps": steps, "warmup_steps": warmup, "warmup_s": round(warm_s, 2),
        "step_s": round((time.monotonic() - started) / max(steps, 1), 4),
        "own_bytes_per_step": round(slope(own), 1),
        "own_halves_per_step": [round(slope(own[:half]), 1), round(slope(own[half:]), 1)],
        "own_growth_bytes": own[-1] - own[0],
        "rss_bytes_per_step": round(slope(rss), 1),
        "own_samples": own, "rss_samples": rss,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", help="a native step file")
    parser.add_argument("size", nargs="?", default="small")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", help=f"threads of the framework (default {steady.THREADS})")
    args = parser.parse_args()
    module = load(args.step)
    if args.size not in module.SIZES:
        print(f"error: {args.step} has no size {args.size!r}; its sizes: {', '.join(module.SIZES)}", file=sys.stderr)
        raise SystemExit(2)
    if args.steps < 2 or args.warmup < 0:
        print("error: --steps takes 2 or more, --warmup 0 or more", file=sys.stderr)
        raise SystemExit(2)
    cfg = dict(module.SIZES[args.size], device="cpu", dtype="float32")
    found = run(module, cfg, args.steps, args.warmup)
    versions = {}
    for name in ("torch", "tensorflow", "timm"):
        if name in sys.modules:
            versions[name] = getattr(sys.modules[name], "__version__", None)
    print(json.dumps(dict(found, step_file=os.path.basename(args.step), size=args.size, config=module.SIZES[args.size],
                          threads=int(THREADS),
                          python=sys.version.split()[0], versions=versions)))


if __name__ == "__main__":
    main()
