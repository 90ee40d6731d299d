"""The probe a standalone script carries: the harness's memory pass in a few dozen lines.

This module imports the standard library only; `script.py` copies its source (below
the marker) into every standalone script, so what the script measures is what this
file says, and tests run it here. The recipe is docs/measurement.md's memory pass:

- the interpreter starts with ``MALLOC_MMAP_THRESHOLD_=32768`` (and the thread counts)
  set: the script sets them and runs itself again before anything is imported;
- the framework's one-time start-up is paid before the baseline (`warm_up_runtime`:
  one tiny gradient in the same mode), as imports are;
- baseline: ``gc.collect()``, ``malloc_trim(0)``, then /proc/self/status;
- the cold first step, measured; one unmeasured warm-up step; three steady steps, each
  after ``gc.collect()`` + ``malloc_trim(0)``; the figures are the median step's (by
  its step peak);
- a phase's **step peak** is VmHWM after writing ``5`` to /proc/self/clear_refs at
  the phase's start, minus VmRSS at the step's start; the step's is the largest phase;
- **retained** is the framework's own pages (RssAnon + RssShmem) at a steady step's
  start above the baseline's; **code pages** the file-backed pages (RssFile) likewise;
  **footprint** = retained + step peak; the first step's figures likewise;
- **leak**, the growth per step, in the scripts of a change of it only (the part below
  the second marker): GROWTH_STEPS steady steps, the Theil-Sen slope of the second half
  of their own-memory readings, as harness/measure/leak.py computes it.
"""

# ---- probe (copied into the scripts from here on) ----
import ctypes
import ctypes.util
import gc
import json
import os
import platform
import re
import sys

_STATUS = re.compile(r"^(VmRSS|VmHWM|RssAnon|RssFile|RssShmem):\s+(\d+)\s+kB", re.MULTILINE)


def status():
    """VmRSS, VmHWM, RssAnon, RssFile, RssShmem of this process, in bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        return {key: int(kb) * 1024 for key, kb in _STATUS.findall(handle.read())}


def settle():
    """Collect garbage, then give glibc's free heap pages back (what runs before every step)."""
    gc.collect()
    ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def reset_peak():
    """VmHWM := VmRSS now (the kernel's high-water mark, reset)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def own(reading):
    """The process's own pages: anonymous and shared memory (file pages are library code)."""
    return reading.get("RssAnon", 0) + reading.get("RssShmem", 0)


def one_step(step, params, inputs, sync, baseline):
    """One training step, phase by phase: its figures ({name: bytes}) and its gradients.
    `step` is (forward, backward), or (value_and_grad,) where the step is one program."""
    start, peaks = status(), {}
    if len(step) == 2:
        forward, backward = step
        reset_peak()
        state = forward(params, inputs)
        sync(state)
        peaks["forward"] = status()["VmHWM"] - start["VmRSS"]
        reset_peak()
        grads = backward(state)
        sync(grads)
        del state  # a training loop lets the graph go once the backward has run
        peaks["backward"] = status()["VmHWM"] - start["VmRSS"]
    else:
        reset_peak()
        _, grads = step[0](params, inputs)
        sync(grads)
        peaks["gradient"] = status()["VmHWM"] - start["VmRSS"]
    retained = own(start) - own(baseline)
    figures = {"retained": retained, "code_pages": start.get("RssFile", 0) - baseline.get("RssFile", 0),
               "step_peak": max(peaks.values())}
    figures.update({f"step_peak.{phase}": value for phase, value in peaks.items() if phase != "gradient"})
    figures["footprint"] = retained + figures["step_peak"]
    return figures, grads


def measure(step, params, inputs, sync, warmup=1, steps=3):
    """{figure: bytes} of the first step (first_step_*) and of the median steady step,
    and every steady step's figures."""
    settle()
    baseline = status()
    first, grads = one_step(step, params, inputs, sync, baseline)
    del grads
    for _ in range(warmup):
        settle()
        one_step(step, params, inputs, sync, baseline)
    samples = []
    for _ in range(steps):
        settle()
        samples.append(one_step(step, params, inputs, sync, baseline)[0])
    steady = sorted(samples, key=lambda s: s["step_peak"])[(len(samples) - 1) // 2]
    figures = dict(steady)
    # the registry's names: first_step_peak(.phase), first_step_footprint, first_step_retained
    figures.update({"first_step_" + name.replace("step_peak", "peak"): value
                    for name, value in first.items() if name != "code_pages"})
    return figures, samples


def third_party_modules():
    """The top-level modules imported that are not the standard library's (what the
    script's results depend on: the framework, NumPy and what they import)."""
    roots = [p for p in sys.path if p and os.path.isdir(p)]
    names = set()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        # installed ones only: not the code a compiler generated into its cache
        if "." not in name and not name.startswith("_") and any(where.startswith(root) for root in roots):
            names.add(name)
    return sorted(names - set(sys.stdlib_module_names))


def report(figures, samples, figure, distributions, environment):
    """One JSON line on stdout (the figures, the versions, the `environment` variables
    set); `figure` on stderr."""
    from importlib import metadata

    versions = {}
    for name in distributions:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    print(f"{figure}: {figures[figure] / 2**20:.2f} MiB", file=sys.stderr)
    print(json.dumps({"figures": figures, "steady_samples": samples, "figure": figure, "versions": versions,
                      "python": platform.python_version(), "platform": platform.platform(),
                      "modules": third_party_modules(),
                      "environment": {k: os.environ.get(k) for k in environment}}))


# ---- growth (copied into the scripts of a growth-per-step change from here on) ----
GROWTH_STEPS = 24  # steady steps read: the leak phase's longer run (harness/measure/leak.py, LONG)


def growth_per_step(readings):
    """Bytes a step that the framework's own memory grows over the second half of
    `readings` (its own pages at each steady step's settled start, in step order): the
    Theil-Sen slope, the median of the pairwise slopes, which a single jump barely moves.
    The second half: growth still going on at the end (a cache that fills and stops is
    not counted)."""
    points = list(enumerate(readings))[len(readings) // 2:]
    slopes = sorted((b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points) for b in points[i + 1:])
    if not slopes:
        return 0.0
    middle = len(slopes) // 2
    return float(slopes[middle] if len(slopes) % 2 else (slopes[middle - 1] + slopes[middle]) / 2)


def with_growth(figures, samples, steady=3):
    """`figures` with the memory figures of the first `steady` steady steps (their median
    step, as measure() reads three: the later steps' retained carries what grew since) and
    the growth per step over all of `samples` as `leak`."""
    figures = dict(figures, **sorted(samples[:steady], key=lambda s: s["step_peak"])[(steady - 1) // 2])
    figures["leak"] = growth_per_step([sample["retained"] for sample in samples])
    return figures


def report_growth(figures, samples, figure, distributions, environment):
    """report(), with the growth per step on stderr in KiB a step (the memory figures it
    prints in MiB)."""
    print(f"leak: {figures['leak'] / 1024:.1f} KiB a step (the framework's own pages over the second half of "
          f"{len(samples)} steady steps)", file=sys.stderr)
    report(figures, samples, "retained" if figure == "leak" else figure, distributions, environment)
