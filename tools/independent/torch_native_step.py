"""A native torch step file measured without the harness: step peak and retained.

    python tools/independent/torch_native_step.py STEP.py [SIZE] [--no-runtime-warmup]

STEP.py is a native step (FRAMEWORK, SIZES, setup(cfg), step(state), optionally
sync(state): docs/workloads.md); it is imported here with importlib, nothing of
`harness` is. The recipe is docs/measurement.md's, written again (steady.py sets the
environment: MALLOC_MMAP_THRESHOLD_=32768 and 2 threads, before the interpreter starts):

1. ``setup(cfg)`` with the size's config and device "cpu", dtype "float32";
2. a runtime warm-up, unless --no-runtime-warmup: one gradient of a 4x4 tanh layer,
   which pays torch's one-time start-up (autograd's first use) before the baseline, as
   the harness's warm-up does;
3. the baseline: ``gc.collect()``, ``malloc_trim(0)``, then VmRSS and RssAnon + RssShmem
   from /proc/self/status;
4. the first step, then one warm-up step; then 3 steps, each after ``gc.collect()`` +
   ``malloc_trim(0)``: VmRSS at its start (retained = it minus the baseline; the anon
   part from RssAnon + RssShmem), ``5`` into /proc/self/clear_refs, the step,
   VmHWM minus its start (the step peak). The step whose peak is the median is printed.

One JSON line: {"peak_bytes", "retained_bytes", "retained_anon_bytes",
"first_step_peak_bytes", "samples": [...]}.
"""

import argparse
import ctypes
import gc
import importlib.util
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steady  # noqa: E402  (the environment of the recipe: steady.ENVIRONMENT)

steady.ensure_environment()

_libc = ctypes.CDLL("libc.so.6")


def status():
    """{VmRSS, VmHWM, RssAnon, RssShmem} of this process, bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        text = handle.read()
    return {key: int(kb) * 1024 for key, kb in re.findall(r"^(VmRSS|VmHWM|RssAnon|RssShmem):\s+(\d+) kB", text, re.M)}


def settle():
    gc.collect()
    _libc.malloc_trim(0)


def reset_high_water_mark():
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def resident():
    """(VmRSS, RssAnon + RssShmem) now."""
    found = status()
    return found["VmRSS"], found["RssAnon"] + found.get("RssShmem", 0)


def load(path):
    spec = importlib.util.spec_from_file_location("independent_native_step", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(module, cfg, runtime_warmup=True, steps=3):
    import torch

    torch.set_num_threads(int(steady.THREADS))
    torch.set_num_interop_threads(int(steady.THREADS))
    state = module.setup(cfg)
    if runtime_warmup:
        w = torch.randn(4, 4, requires_grad=True)
        torch.autograd.grad(torch.tanh(torch.randn(4, 4) @ w).sum(), [w])
        del w

    def one_step():
        returned = module.step(state)
        if hasattr(module, "sync"):
            module.sync(state)
        return returned

    settle()
    baseline, baseline_anon = resident()

    def measured():
        settle()
        start, start_anon = resident()
        reset_high_water_mark()
        one_step()
        return {"peak_bytes": status()["VmHWM"] - start, "retained_bytes": start - baseline,
                "retained_anon_bytes": start_anon - baseline_anon}

    first = measured()
    one_step()  # warm-up
    samples = [measured() for _ in range(steps)]
    median = sorted(samples, key=lambda s: s["peak_bytes"])[(len(samples) - 1) // 2]
    return dict(median, first_step_peak_bytes=first["peak_bytes"], samples=samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", help="a native torch step file")
    parser.add_argument("size", nargs="?", default="small")
    parser.add_argument("--no-runtime-warmup", dest="runtime_warmup", action="store_false")
    args = parser.parse_args()
    module = load(args.step)
    if module.FRAMEWORK != "torch":
        sys.exit(f"{args.step} is a native {module.FRAMEWORK} step; this script measures torch steps")
    cfg = dict(module.SIZES[args.size], device="cpu", dtype="float32")
    print(json.dumps(measure(module, cfg, args.runtime_warmup)))


if __name__ == "__main__":
    main()
