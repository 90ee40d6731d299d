"""jax 0.9.1: first-step peak of an eager jax.vjp training step rises by 3.57 MiB (+5.9%) from 0.9.0.1 (shared_linear, CPU)

gradmem found first_step_peak of shared_linear (eager) move from 60.81 MiB at 0.9.0.1 to 64.38 MiB at 0.9.1 (id jax:shared_linear:eager:first_step_peak:0.9.0.1->0.9.1).

Standalone: imports only jax, NumPy and the standard library. Run it once under each
release (a fresh environment with that release and NumPy installed):

    python {this file}

It prints one JSON line: the figures in bytes (retained: the framework's own pages, RssAnon +
RssShmem, at a steady step's start above a baseline taken before the first step; step_peak:
VmHWM after writing 5 to /proc/self/clear_refs, minus VmRSS at the step's start; footprint:
their sum; first_step_*: the same of the cold first step), every steady step's, the versions
and the modules imported; and the figure of the change on stderr.

Written by gradmem (python -m harness report-change): the workload is gradmem's op-set code with
its ops called through an op table of jax code as written (ops.add(x, y), OPS.add a lambda),
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


# ---- jax, as the sweep ran it --------------------------------------------------------------

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)  # as gradmem's adapter: the arrays stay float32
jax.config.update("jax_default_device", jax.devices("cpu")[0])


# ---- the workload: shared_linear (PyTorch PR #4746 (heuristic-based autograd execution order)) ----
import types
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'B': 16, 'D': 512, 'K': 32}
FIGURE = 'first_step_peak'  # the figure the change is about
DISTRIBUTIONS = ['jax', 'jaxlib', 'jax-cuda12-plugin', 'jax-cuda12-pjrt', 'jax-cuda13-plugin', 'jax-cuda13-pjrt', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def checkpoint(f, *xs):
    """One segment with no remat: just the call."""
    return f(*xs)


remat_lib = types.SimpleNamespace(checkpoint=checkpoint, chain=chain)  # no remat


def _make_ops(jax):
    import types

    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def conv2d(x, w, stride=1, padding=0):
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=(stride, stride),
            padding=((padding, padding), (padding, padding)),
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )

    def max_pool2d(x, size=2):
        # -inf of x's dtype: JAX recognises (max, -inf) as the max monoid and uses its
        # differentiable reduce_window_max; "VALID" drops a ragged edge, as torch does.
        window = (1, 1, size, size)
        return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, window, "VALID")

    def upsample2d(x, scale=2):
        n, c, h, w = x.shape
        return jax.image.resize(x, (n, c, h * scale, w * scale), method="nearest")

    return types.SimpleNamespace(
        add=jnp.add,
        sub=jnp.subtract,
        mul=jnp.multiply,
        div=jnp.true_divide,
        neg=jnp.negative,
        exp=jnp.exp,
        log=jnp.log,
        sqrt=jnp.sqrt,
        tanh=jnp.tanh,
        sigmoid=jax.nn.sigmoid,
        relu=jax.nn.relu,
        sin=jnp.sin,
        cos=jnp.cos,
        matmul=jnp.matmul,
        sum=lambda x, axis=None, keepdims=False: jnp.sum(x, axis=axis, keepdims=keepdims),
        mean=lambda x, axis=None, keepdims=False: jnp.mean(x, axis=axis, keepdims=keepdims),
        max=lambda x, axis=None, keepdims=False: jnp.max(x, axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: jnp.reshape(x, tuple(shape)),
        permute_dims=lambda x, axes: jnp.transpose(x, tuple(axes)),
        concat=lambda xs, axis=0: jnp.concatenate(list(xs), axis=axis),
        stack=lambda xs, axis=0: jnp.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=lambda x, indices, axis=0: jnp.take(x, indices, axis=axis),
        where=jnp.where,
        softmax=lambda x, axis=-1: jax.nn.softmax(x, axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: jax.nn.logsumexp(x, axis=axis, keepdims=keepdims),
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: jnp.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )


OPS = _make_ops(jax)


def init(rng, cfg, dtype):
    B, D = (cfg['B'], cfg['D'])
    params = {'W': 0.9 / math.sqrt(D) * rng.standard_normal((D, D)), 'b': 0.1 * rng.standard_normal(D)}
    inputs = {'x': rng.standard_normal((cfg['K'], B, D))}
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return (cast(params), cast(inputs))


def loss(ops, params, inputs, cfg):
    W, b = (params['W'], params['b'])
    per_use = []
    for k in range(cfg['K']):
        x_k = ops.getitem(inputs['x'], k)
        h = ops.tanh(ops.add(ops.matmul(x_k, ops.permute_dims(W, (1, 0))), b))
        per_use.append(ops.mean(ops.mul(h, h)))
    return ops.sum(ops.stack(per_use))


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
    figures, samples = measure(step, params, inputs, sync)
    report(figures, samples, FIGURE, DISTRIBUTIONS, ENVIRONMENT)


if __name__ == "__main__":
    main()
