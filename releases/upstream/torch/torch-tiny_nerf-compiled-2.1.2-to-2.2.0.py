"""torch 2.2.0: step peak of a torch.compile training step falls by 1.75 MiB (-15.0%) from 2.1.2 (tiny_nerf, CPU)

gradmem found step_peak of tiny_nerf (compiled) move from 11.61 MiB at 2.1.2 to 9.86 MiB at 2.2.0 (id torch:tiny_nerf:compiled:step_peak:2.1.2->2.2.0).

Standalone: imports only torch, NumPy and the standard library. Run it once under each
release (a fresh environment with that release and NumPy installed):

    python {this file}

It prints one JSON line: the figures in bytes (retained: the framework's own pages, RssAnon +
RssShmem, at a steady step's start above a baseline taken before the first step; step_peak:
VmHWM after writing 5 to /proc/self/clear_refs, minus VmRSS at the step's start; footprint:
their sum; first_step_*: the same of the cold first step), every steady step's, the versions
and the modules imported; and the figure of the change on stderr.

Written by gradmem (python -m harness report-change): the workload is gradmem's op-set code with
torch's ops inlined; the measurement is gradmem's memory pass (docs/measurement.md).
"""

import os
import sys

# The environment of a memory measurement, set before the interpreter starts (glibc reads
# MALLOC_MMAP_THRESHOLD_ only then: buffers of 32 KiB or more are mmapped and go back to the
# OS when freed, so a peak cannot hide in heap memory kept from before): the script runs
# itself again with it.
ENVIRONMENT = {
    'MALLOC_MMAP_THRESHOLD_': '32768',
    'MKL_NUM_THREADS': '2',
    'OMP_NUM_THREADS': '2',
    'OPENBLAS_NUM_THREADS': '2',
}
if any(os.environ.get(k) != v for k, v in ENVIRONMENT.items()):
    os.execve(sys.executable, getattr(sys, "orig_argv", [sys.executable, *sys.argv]),
              {**os.environ, **ENVIRONMENT})


# ---- the probe (gradmem's memory pass, docs/measurement.md) --------------------------------
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


# ---- torch, as the sweep ran it ------------------------------------------------------------
# A compiled torch step compiles into an empty Inductor cache of its own (a cold compile,
# whatever ran before on the machine), removed when the script ends.
import atexit
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="repro-inductor-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE
os.environ["TRITON_CACHE_DIR"] = os.path.join(_CACHE, "triton")

import numpy as np
import torch

torch.set_num_threads(2)
torch.set_num_interop_threads(2)


# ---- the workload: tiny_nerf (candle #1241 (tiny NeRF from the TensorFlow tiny_nerf notebook)) ----
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'rays': 64, 'samples': 32, 'width': 128, 'depth': 8, 'freqs': 6}
FIGURE = 'step_peak'  # the figure the change is about
DISTRIBUTIONS = ['torch', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


SKIP_AFTER = 4


NEAR, FAR = (2.0, 6.0)


def n_features(freqs):
    return 3 + 3 * 2 * freqs


def layer_widths(cfg):
    """(fan_in, fan_out) of every dense layer, the output layer last."""
    enc, width = (n_features(cfg['freqs']), cfg['width'])
    widths, fan_in = ([], enc)
    for i in range(cfg['depth']):
        widths.append((fan_in, width))
        fan_in = width + enc if _skips(i) else width
    widths.append((fan_in, 4))
    return widths


def _skips(i):
    return i % SKIP_AFTER == 0 and i > 0


def segments(depth):
    """(first, stop) layer ranges of the checkpoint segments: cut after each skip layer."""
    cuts = [i + 1 for i in range(depth) if _skips(i)]
    bounds = sorted({0, *cuts, depth})
    return list(zip(bounds, bounds[1:]))


def init(rng, cfg, dtype):
    R, S = (cfg['rays'], cfg['samples'])
    params = {}
    for i, (fan_in, fan_out) in enumerate(layer_widths(cfg)):
        gain = 2.0 if i < cfg['depth'] else 1.0
        params[f'W{i}'] = rng.standard_normal((fan_in, fan_out)) * math.sqrt(gain / fan_in)
        params[f'b{i}'] = 0.1 * rng.standard_normal(fan_out)
    params[f"b{cfg['depth']}"][3] += 1.0
    origins = rng.standard_normal((R, 3))
    origins *= 4.0 / np.linalg.norm(origins, axis=1, keepdims=True)
    dirs = -origins / 4.0 + 0.1 * rng.standard_normal((R, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    step = (FAR - NEAR) / S
    z = NEAR + step * (np.arange(S) + rng.random((R, S)))
    points = origins[:, None, :] + dirs[:, None, :] * z[:, :, None]
    deltas = np.concatenate([np.diff(z, axis=1), np.full((R, 1), step)], axis=1)
    inputs = {'points': points.reshape(R * S, 3), 'deltas': deltas, 'target': rng.random((R, 3))}
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return (cast(params), cast(inputs))


def encode(x, freqs):
    """[x, sin(2^k x), cos(2^k x) for k < freqs] (R*S, 3 + 6 freqs). A function of its
    own so that the 2 freqs sin/cos arrays are dropped once concatenated, rather than
    held by the loss's locals through the whole forward pass."""
    features = [x]
    for k in range(freqs):
        scaled = x * float(2 ** k)
        features += [torch.sin(scaled), torch.cos(scaled)]
    return torch.cat(features, dim=-1)


def loss(params, inputs, cfg):
    R, S, depth = (cfg['rays'], cfg['samples'], cfg['depth'])
    encoded = encode(inputs['points'], cfg['freqs'])

    def layers(first, stop):

        def segment(h, consts):
            for i in range(first, stop):
                h = torch.relu(h @ consts[f'W{i}'] + consts[f'b{i}'])
                if _skips(i):
                    h = torch.cat([h, consts['encoded']], dim=-1)
            return h
        return segment
    h = encoded
    for first, stop in segments(depth):
        consts = {key: params[key] for i in range(first, stop) for key in (f'W{i}', f'b{i}')}
        if any((_skips(i) for i in range(first, stop))):
            consts['encoded'] = encoded
        h = layers(first, stop)(h, consts)
    raw = h @ params[f'W{depth}'] + params[f'b{depth}']
    raw = torch.reshape(raw, (R, S, 4))
    sigma = torch.relu(raw[..., 3])
    rgb = torch.sigmoid(raw[..., 0:3])
    sd = sigma * inputs['deltas']
    alpha = 1.0 - torch.exp(-sd)
    transmittance = torch.exp(-(torch.cumsum(sd, dim=1) - sd))
    weights = torch.reshape(alpha * transmittance, (R, S, 1))
    pixels = torch.sum(weights * rgb, dim=1)
    err = pixels - inputs['target']
    return torch.mean(err * err)


# ---- the step, compiled --------------------------------------------------------------------
def make_step(loss_fn):
    """(forward, backward) of loss_fn under torch.compile (Inductor), then torch.autograd.grad."""
    run = torch.compile(loss_fn, dynamic=False)

    def forward(params, inputs):
        with torch.enable_grad():
            leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
            return run(leaves, inputs), leaves

    def backward(state):
        value, leaves = state
        return dict(zip(leaves, torch.autograd.grad(value, list(leaves.values()))))

    return forward, backward


def arrays(tree):
    """NumPy arrays as torch tensors (copies: a tensor from_numpy shares the array's memory)."""
    return {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tree.items()}


def sync(tree):
    return tree  # torch runs CPU ops as they are called


# ---- the runtime warm-up: the framework's one-time start-up, before the baseline -----------
def tiny_loss(params, inputs):

    def layer(i, x, consts):
        return torch.tanh(x @ consts['w'])
    x = chain(layer, inputs['x'], 2, {'w': params['w']})
    return torch.sum((lambda x, w: layer(2, x, {'w': w}))(x, params['w']))


def warm_up_runtime():
    """One gradient of two 4x4 tanh layers in the same mode: what the framework keeps for
    the life of the process once it has computed anything (XLA's compiler, Inductor's
    toolchain) is paid before the baseline, as imports are."""
    rng = np.random.default_rng(0)
    params = arrays({"w": rng.standard_normal((4, 4)).astype(DTYPE)})
    inputs = arrays({"x": rng.standard_normal((4, 4)).astype(DTYPE)})
    step = make_step(tiny_loss)
    if len(step) == 2:
        sync(step[1](step[0](params, inputs)))
    else:
        sync(step[0](params, inputs))


# ---- main ----------------------------------------------------------------------------------
def main():
    warm_up_runtime()
    host = init(np.random.default_rng(SEED), CFG, DTYPE)
    params, inputs = arrays(host[0]), arrays(host[1])
    del host  # the framework's arrays are what the steps use
    step = make_step(lambda params, inputs: loss(params, inputs, CFG))
    figures, samples = measure(step, params, inputs, sync, steps=GROWTH_STEPS)
    # the memory figures of the first three steady steps; own memory at each one's settled start: its growth per step
    figures = with_growth(figures, samples)
    report_growth(figures, samples, FIGURE, DISTRIBUTIONS, ENVIRONMENT)


if __name__ == "__main__":
    main()
