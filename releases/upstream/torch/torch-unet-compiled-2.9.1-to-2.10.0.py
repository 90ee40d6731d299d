"""torch 2.10.0: footprint of a torch.compile training step falls by 1.45 MiB (-6.1%) from 2.9.1 (unet, CPU)

gradmem found footprint of unet (compiled) move from 23.59 MiB at 2.9.1 to 22.14 MiB at 2.10.0 (id torch:unet:compiled:footprint:2.9.1->2.10.0).

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
F = torch.nn.functional

torch.set_num_threads(2)
torch.set_num_interop_threads(2)


# ---- the workload: unet (cybertronai/gradient-checkpointing #11 (gchlebus's U-Net)) --------
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'N': 2, 'C_in': 1, 'C_out': 2, 'HW': 64, 'filters': 8, 'levels': 2}
FIGURE = 'footprint'  # the figure the change is about
DISTRIBUTIONS = ['torch', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def convs(cfg):
    """(name, in_channels, out_channels, kernel) of every conv, in forward order."""
    F, L = (cfg['filters'], cfg['levels'])
    layers, c_in = ([], cfg['C_in'])
    for level in range(L + 1):
        c = F * 2 ** level
        layers += [(f'enc{level}a', c_in, c, 3), (f'enc{level}b', c, c, 3)]
        c_in = c
    for level in reversed(range(L)):
        c = F * 2 ** level
        layers += [(f'up{level}', c_in, c, 3), (f'dec{level}a', 2 * c, c, 3), (f'dec{level}b', c, c, 3)]
        c_in = c
    layers.append(('out', c_in, cfg['C_out'], 1))
    return layers


def init(rng, cfg, dtype):
    if cfg['HW'] % 2 ** cfg['levels']:
        raise ValueError(f"image side {cfg['HW']} must be divisible by 2**levels")
    params = {}
    for name, c_in, c_out, k in convs(cfg):
        fan_in = c_in * k * k
        gain = 1.0 if name.startswith(('up', 'out')) else 2.0
        params[f'{name}_w'] = rng.standard_normal((c_out, c_in, k, k)) * math.sqrt(gain / fan_in)
        params[f'{name}_b'] = 0.1 * rng.standard_normal(c_out)
    shape = (cfg['N'], cfg['C_in'], cfg['HW'], cfg['HW'])
    inputs = {'image': rng.random(shape), 'labels': rng.random((cfg['N'], cfg['C_out'], cfg['HW'], cfg['HW']))}
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return (cast(params), cast(inputs))


def _conv(params, name, x, padding=1):
    w, b = (params[f'{name}_w'], params[f'{name}_b'])
    y = F.conv2d(x, w, padding=padding)
    return y + torch.reshape(b, (1, -1, 1, 1))


def _block(params, prefix, x):
    x = torch.relu(_conv(params, f'{prefix}a', x))
    return torch.relu(_conv(params, f'{prefix}b', x))


def _params_of(params, *layers):
    """The flat dict of the named convs' weights and biases (a segment's consts)."""
    return {f'{name}_{part}': params[f'{name}_{part}'] for name in layers for part in ('w', 'b')}


def loss(params, inputs, cfg):
    L = cfg['levels']

    def encoder(level):

        def segment(x, p):
            return _block(p, f'enc{level}', x)
        return segment

    def decoder(level):

        def segment(x, skip, p):
            up = _conv(p, f'up{level}', F.interpolate(x, scale_factor=2, mode='nearest'))
            return _block(p, f'dec{level}', torch.cat([up, skip], dim=1))
        return segment
    skips, x = ([], inputs['image'])
    for level in range(L):
        x = encoder(level)(x, _params_of(params, f'enc{level}a', f'enc{level}b'))
        skips.append(x)
        x = F.max_pool2d(x, kernel_size=2, stride=2)
    x = encoder(L)(x, _params_of(params, f'enc{L}a', f'enc{L}b'))
    for level in reversed(range(L)):
        p = _params_of(params, f'up{level}', f'dec{level}a', f'dec{level}b')
        x = decoder(level)(x, skips[level], p)
    logits = _conv(params, 'out', x, padding=0)
    log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -torch.mean(torch.sum(inputs['labels'] * log_probs, dim=1))


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
    figures, samples = measure(step, params, inputs, sync)
    report(figures, samples, FIGURE, DISTRIBUTIONS, ENVIRONMENT)


if __name__ == "__main__":
    main()
