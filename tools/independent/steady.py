"""The measurement recipe of docs/design.md (Evidence), written apart from the harness.

The scripts beside this file each measure one steady training step of a workload in
one framework without importing `harness`, so that a test can check the harness's
figures against code that shares none of its measuring machinery:

    python tools/independent/torch_step.py WORKLOAD PROBLEM.npz CONFIG_JSON [eager|compiled]

PROBLEM.npz holds the params (``p:<name>``) and inputs (``i:<name>``) as NumPy arrays,
CONFIG_JSON the workload's size config; the mode (default eager) picks the step as that
framework's users write it: compiled is one program for the whole step where they write
one (``jax.jit(jax.value_and_grad(f))``, a ``tf.function`` around the tape step), measured
by `measure_joint` as one phase (``total``). The script prints one JSON line:
``{"peak_bytes": {"forward", "backward", "total"}, "samples": [...]}``.

Recipe: the environment a measurement needs is set before the interpreter starts
(the script re-executes itself with it); two warm-up steps; then three steps, each
after ``gc.collect()`` + ``malloc_trim(0)`` with a *fresh* baseline (VmRSS) taken just
before it and the high-water mark reset (``5`` into /proc/self/clear_refs) at each
phase boundary; a phase's figure is VmHWM minus that baseline; the step whose total is
the median is printed.
"""

import ctypes
import gc
import json
import os
import re
import sys

THREADS = "2"
ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": "32768",  # buffers of 32 KiB or more are mmapped, freed to the OS
    "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",  # TF's oneDNN pool would hide peaks from RSS
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    "OMP_NUM_THREADS": THREADS,
    "OPENBLAS_NUM_THREADS": THREADS,
    "MKL_NUM_THREADS": THREADS,
    "PJRT_NPROC": THREADS,
    "TF_NUM_INTRAOP_THREADS": THREADS,
    "TF_NUM_INTEROP_THREADS": THREADS,
}
_libc = ctypes.CDLL("libc.so.6")


def ensure_environment():
    """Re-execute this script with ENVIRONMENT set, unless it already is."""
    if all(os.environ.get(k) == v for k, v in ENVIRONMENT.items()):
        return
    env = {**os.environ, **ENVIRONMENT}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def arguments():
    """(workload, params, inputs, config) from the command line."""
    import numpy as np

    workload, npz, config = sys.argv[1:4]
    with np.load(npz) as data:
        params = {k[2:]: data[k] for k in data.files if k.startswith("p:")}
        inputs = {k[2:]: data[k] for k in data.files if k.startswith("i:")}
    return workload, params, inputs, json.loads(config)


def mode():
    """The step's mode from the command line: eager (default) or compiled."""
    chosen = sys.argv[4] if len(sys.argv) > 4 else "eager"
    if chosen not in ("eager", "compiled"):
        sys.exit(f"mode must be eager or compiled, got {chosen!r}")
    return chosen


def _status(key):
    with open("/proc/self/status", encoding="ascii") as handle:
        return int(re.search(rf"^{key}:\s+(\d+) kB", handle.read(), re.MULTILINE)[1]) * 1024


def _reset_high_water_mark():
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def _fresh_baseline():
    """Collect, trim the heap, reset the high-water mark: the resident bytes now."""
    gc.collect()
    _libc.malloc_trim(0)
    baseline = _status("VmRSS")
    _reset_high_water_mark()
    return baseline


def _median(samples):
    median = sorted(samples, key=lambda s: s["total"])[(len(samples) - 1) // 2]
    return {"peak_bytes": median, "samples": samples}


def measure(forward, backward, warmup=2, steps=3):
    """Peaks of `backward(forward())` above a fresh baseline, per phase: the median step."""
    for _ in range(warmup):
        backward(forward())
    samples = []
    for _ in range(steps):
        baseline = _fresh_baseline()
        state = forward()
        after_forward = _status("VmHWM") - baseline
        _reset_high_water_mark()
        grads = backward(state)
        del state
        after_backward = _status("VmHWM") - baseline
        del grads
        samples.append({"forward": after_forward, "backward": after_backward,
                        "total": max(after_forward, after_backward)})
    return _median(samples)


def measure_joint(step, warmup=2, steps=3):
    """Peaks of one call `step()` (loss and gradients together) above a fresh baseline:
    the median of `steps`, as `measure` does, with ``total`` only."""
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(steps):
        baseline = _fresh_baseline()
        result = step()
        samples.append({"total": _status("VmHWM") - baseline})
        del result
    return _median(samples)


def report(figures):
    print(json.dumps(figures))
