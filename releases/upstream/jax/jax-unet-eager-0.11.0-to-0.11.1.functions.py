"""jax 0.11.1: footprint of an eager jax.vjp training step falls by 131.07 MiB (-67.7%) from 0.11.0 (unet, CPU)

gradmem found footprint of unet (eager) move from 193.57 MiB at 0.11.0 to 62.49 MiB at 0.11.1 (id jax:unet:eager:footprint:0.11.0->0.11.1).

Standalone: imports only jax, NumPy and the standard library. Run it once under each
release (a fresh environment with that release and NumPy installed):

    python {this file}

It prints one JSON line: the figures in bytes (retained: the framework's own pages, RssAnon +
RssShmem, at a steady step's start above a baseline taken before the first step; step_peak:
VmHWM after writing 5 to /proc/self/clear_refs, minus VmRSS at the step's start; footprint:
their sum; first_step_*: the same of the cold first step), every steady step's, the versions
and the modules imported; and the figure of the change on stderr.

Written by gradmem (python -m harness report-change): the workload is gradmem's op-set code with
each op a call of a small function of jax code (op_add, op_matmul, ...), as gradmem's
op table calls them; the measurement is gradmem's memory pass (docs/measurement.md).
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
    'PJRT_NPROC': '2',
    'XLA_PYTHON_CLIENT_PREALLOCATE': 'false',
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


# ---- jax, as the sweep ran it --------------------------------------------------------------

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)  # as gradmem's adapter: the arrays stay float32
jax.config.update("jax_default_device", jax.devices("cpu")[0])


# ---- the workload: unet (cybertronai/gradient-checkpointing #11 (gchlebus's U-Net)) --------
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'N': 2, 'C_in': 1, 'C_out': 2, 'HW': 64, 'filters': 8, 'levels': 2}
FIGURE = 'footprint'  # the figure the change is about
DISTRIBUTIONS = ['jax', 'jaxlib', 'jax-cuda12-plugin', 'jax-cuda12-pjrt', 'jax-cuda13-plugin', 'jax-cuda13-pjrt', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def conv2d(x, w, stride=1, padding=0):
    """x NCHW, w OIHW, as torch.nn.functional.conv2d."""
    return lax.conv_general_dilated(x, w, window_strides=(stride, stride),
                                    padding=((padding, padding), (padding, padding)),
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def max_pool2d(x, size=2):
    """Max over size x size windows, stride size, NCHW; (max, -inf) is the max monoid, so
    JAX uses its differentiable reduce_window_max."""
    window = (1, 1, size, size)
    return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, window, "VALID")


def op_add(x, y):
    return x + y


def op_concat(xs, axis=0):
    return jnp.concatenate(xs, axis=axis)


def op_conv2d(x, w, stride=1, padding=0):
    return conv2d(x, w, stride=stride, padding=padding)


def op_logsumexp(x, axis=-1, keepdims=False):
    return jax.nn.logsumexp(x, axis=axis, keepdims=keepdims)


def op_matmul(a, b):
    return a @ b


def op_max_pool2d(x, size=2):
    return max_pool2d(x, size)


def op_mean(x, axis=None, keepdims=False):
    return jnp.mean(x, axis=axis, keepdims=keepdims)


def op_mul(x, y):
    return x * y


def op_neg(x):
    return -x


def op_relu(x):
    return jax.nn.relu(x)


def op_reshape(x, shape):
    return jnp.reshape(x, shape)


def op_sub(x, y):
    return x - y


def op_sum(x, axis=None, keepdims=False):
    return jnp.sum(x, axis=axis, keepdims=keepdims)


def op_tanh(x):
    return jnp.tanh(x)


def op_upsample2d(x, scale=2):
    return upsample2d(x, scale)


def upsample2d(x, scale=2):
    n, c, h, w = x.shape
    return jax.image.resize(x, (n, c, h * scale, w * scale), method="nearest")


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
    y = op_conv2d(x, w, stride=1, padding=padding)
    return op_add(y, op_reshape(b, (1, -1, 1, 1)))


def _block(params, prefix, x):
    x = op_relu(_conv(params, f'{prefix}a', x))
    return op_relu(_conv(params, f'{prefix}b', x))


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
            up = _conv(p, f'up{level}', op_upsample2d(x, 2))
            return _block(p, f'dec{level}', op_concat([up, skip], axis=1))
        return segment
    skips, x = ([], inputs['image'])
    for level in range(L):
        x = encoder(level)(x, _params_of(params, f'enc{level}a', f'enc{level}b'))
        skips.append(x)
        x = op_max_pool2d(x, 2)
    x = encoder(L)(x, _params_of(params, f'enc{L}a', f'enc{L}b'))
    for level in reversed(range(L)):
        p = _params_of(params, f'up{level}', f'dec{level}a', f'dec{level}b')
        x = decoder(level)(x, skips[level], p)
    logits = _conv(params, 'out', x, padding=0)
    log_probs = op_sub(logits, op_logsumexp(logits, axis=1, keepdims=True))
    return op_neg(op_mean(op_sum(op_mul(inputs['labels'], log_probs), axis=1)))


# ---- the step, eager -----------------------------------------------------------------------
def make_step(loss_fn):
    """(forward, backward) of loss_fn without jit: jax.vjp, then its VJP function."""
    def forward(params, inputs):
        return jax.vjp(lambda p: loss_fn(p, inputs), params)

    def backward(state):
        value, vjp_fn = state
        (grads,) = vjp_fn(jnp.ones_like(value))
        return grads

    return forward, backward


def arrays(tree):
    return {k: jax.device_put(v, jax.devices("cpu")[0]) for k, v in tree.items()}


def sync(tree):
    return jax.block_until_ready(tree)  # JAX dispatches asynchronously


# ---- the runtime warm-up: the framework's one-time start-up, before the baseline -----------
def tiny_loss(params, inputs):

    def layer(i, x, consts):
        return op_tanh(op_matmul(x, consts['w']))
    x = chain(layer, inputs['x'], 2, {'w': params['w']})
    return op_sum((lambda x, w: layer(2, x, {'w': w}))(x, params['w']))


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
