"""torch 2.2.0: retained of a torch.compile training step rises by 1.21 MiB (+12.1%) from 2.1.2 (transformer_block, CPU)

gradmem found retained of transformer_block (compiled) move from 9.99 MiB at 2.1.2 to 11.20 MiB at 2.2.0 (id torch:transformer_block:compiled:retained:2.1.2->2.2.0).

Standalone: imports only torch, NumPy and the standard library. Run it once under each
release (a fresh environment with that release and NumPy installed):

    python {this file}

It prints one JSON line: the figures in bytes (retained: the framework's own pages, RssAnon +
RssShmem, at a steady step's start above a baseline taken before the first step; step_peak:
VmHWM after writing 5 to /proc/self/clear_refs, minus VmRSS at the step's start; footprint:
their sum; first_step_*: the same of the cold first step), every steady step's, the versions
and the modules imported; and the figure of the change on stderr.

Written by gradmem (python -m harness report-change): the workload is gradmem's op-set code with
its ops called through an op table of torch code as written (ops.add(x, y), OPS.add a lambda),
as gradmem runs it; the measurement is gradmem's memory pass (docs/measurement.md).
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
F = torch.nn.functional

torch.set_num_threads(2)
torch.set_num_interop_threads(2)


# ---- the workload: transformer_block (Vaswani et al. 2017 (pre-norm transformer block)) ----
import types
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'B': 8, 'T': 128, 'D': 256, 'H': 4, 'F': 1024}
FIGURE = 'retained'  # the figure the change is about
DISTRIBUTIONS = ['torch', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def checkpoint(f, *xs):
    """One segment with no remat: just the call."""
    return f(*xs)


remat_lib = types.SimpleNamespace(checkpoint=checkpoint, chain=chain)  # no remat


def _all_axes(x, axis):
    """torch reduces over `dim`; the contract's None means every axis."""
    return tuple(range(x.ndim)) if axis is None else axis


def _make_ops(torch):
    F = torch.nn.functional

    def take(x, indices, axis=0):
        axis = axis % x.ndim
        if axis == 0 and x.ndim == 2:
            return F.embedding(indices, x)  # nn.Embedding's op: what embedding users run
        flat = torch.index_select(x, axis, indices.reshape(-1))
        return flat.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1 :])

    return types.SimpleNamespace(
        add=lambda x, y: x + y,
        sub=lambda x, y: x - y,
        mul=lambda x, y: x * y,
        div=lambda x, y: x / y,
        neg=torch.neg,
        exp=torch.exp,
        log=torch.log,
        sqrt=torch.sqrt,
        tanh=torch.tanh,
        sigmoid=torch.sigmoid,
        relu=torch.relu,
        sin=torch.sin,
        cos=torch.cos,
        matmul=torch.matmul,
        sum=lambda x, axis=None, keepdims=False: torch.sum(x, dim=_all_axes(x, axis), keepdim=keepdims),
        mean=lambda x, axis=None, keepdims=False: torch.mean(x, dim=_all_axes(x, axis), keepdim=keepdims),
        # amax, not max(dim): the gradient is shared among ties, as in NumPy-based engines
        max=lambda x, axis=None, keepdims=False: torch.amax(x, dim=_all_axes(x, axis), keepdim=keepdims),
        reshape=lambda x, shape: torch.reshape(x, tuple(shape)),
        permute_dims=lambda x, axes: torch.permute(x, tuple(axes)),
        concat=lambda xs, axis=0: torch.cat(list(xs), dim=axis),
        stack=lambda xs, axis=0: torch.stack(list(xs), dim=axis),
        getitem=lambda x, key: x[key],
        take=take,
        where=torch.where,
        softmax=lambda x, axis=-1: torch.softmax(x, dim=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: torch.logsumexp(x, dim=_all_axes(x, axis), keepdim=keepdims),
        conv2d=lambda x, w, stride=1, padding=0: F.conv2d(x, w, stride=stride, padding=padding),
        max_pool2d=lambda x, size=2: F.max_pool2d(x, kernel_size=size, stride=size),
        upsample2d=lambda x, scale=2: F.interpolate(x, scale_factor=scale, mode="nearest"),
        cumsum=lambda x, axis: torch.cumsum(x, dim=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )


OPS = _make_ops(torch)


EPS = 1e-05


def init(rng, cfg, dtype):
    D, F = (cfg['D'], cfg['F'])

    def dense(n_in, n_out):
        return (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(dtype)
    params = {'ln1_g': (1 + 0.1 * rng.standard_normal(D)).astype(dtype), 'ln1_b': (0.1 * rng.standard_normal(D)).astype(dtype), 'wq': dense(D, D), 'wk': dense(D, D), 'wv': dense(D, D), 'wo': dense(D, D), 'ln2_g': (1 + 0.1 * rng.standard_normal(D)).astype(dtype), 'ln2_b': (0.1 * rng.standard_normal(D)).astype(dtype), 'w1': dense(D, F), 'w2': dense(F, D)}
    x = rng.standard_normal((cfg['B'], cfg['T'], D)).astype(dtype)
    return (params, {'x': x})


def layer_norm(ops, x, g, b):
    mu = ops.mean(x, axis=-1, keepdims=True)
    xc = ops.sub(x, mu)
    var = ops.mean(ops.mul(xc, xc), axis=-1, keepdims=True)
    inv = ops.div(1.0, ops.sqrt(ops.add(var, EPS)))
    return ops.add(ops.mul(ops.mul(xc, inv), g), b)


def attention(ops, x, p, cfg):
    B, T, D, H = (cfg['B'], cfg['T'], cfg['D'], cfg['H'])
    a = layer_norm(ops, x, p['ln1_g'], p['ln1_b'])

    def heads(m):
        return ops.permute_dims(ops.reshape(m, (B, T, H, D // H)), (0, 2, 1, 3))
    q, k, v = (heads(ops.matmul(a, p[w])) for w in ('wq', 'wk', 'wv'))
    scores = ops.mul(ops.matmul(q, ops.permute_dims(k, (0, 1, 3, 2))), 1.0 / math.sqrt(D // H))
    o = ops.matmul(ops.softmax(scores, axis=-1), v)
    o = ops.reshape(ops.permute_dims(o, (0, 2, 1, 3)), (B, T, D))
    return ops.add(x, ops.matmul(o, p['wo']))


def mlp(ops, h, p):
    a = layer_norm(ops, h, p['ln2_g'], p['ln2_b'])
    return ops.add(h, ops.matmul(ops.relu(ops.matmul(a, p['w1'])), p['w2']))


def loss(ops, params, inputs, cfg):
    attn = {k: params[k] for k in ('ln1_g', 'ln1_b', 'wq', 'wk', 'wv', 'wo')}
    ffn = {k: params[k] for k in ('ln2_g', 'ln2_b', 'w1', 'w2')}
    h = ops.checkpoint(lambda x, p: attention(ops, x, p, cfg), inputs['x'], attn)
    y = ops.checkpoint(lambda h, p: mlp(ops, h, p), h, ffn)
    return ops.mean(ops.mul(y, y))


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
def tiny_loss_of(ops, params, inputs):

    def layer(i, x, consts):
        return ops.tanh(ops.matmul(x, consts['w']))
    x = ops.chain(layer, inputs['x'], 2, {'w': params['w']})
    return ops.sum(ops.checkpoint(lambda x, w: layer(2, x, {'w': w}), x, params['w']))


def tiny_loss(params, inputs):
    return tiny_loss_of(OPS, params, inputs)


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
    step = make_step(lambda params, inputs: loss(OPS, params, inputs, CFG))
    figures, samples = measure(step, params, inputs, sync, steps=GROWTH_STEPS)
    # the memory figures of the first three steady steps; own memory at each one's settled start: its growth per step
    figures = with_growth(figures, samples)
    report_growth(figures, samples, FIGURE, DISTRIBUTIONS, ENVIRONMENT)


if __name__ == "__main__":
    main()
