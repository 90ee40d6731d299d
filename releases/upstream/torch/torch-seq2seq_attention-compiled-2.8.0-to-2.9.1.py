"""torch 2.9.1: footprint of a torch.compile training step rises by 5.21 MiB (+8.0%) from 2.8.0 (seq2seq_attention, CPU)

gradmem found footprint of seq2seq_attention (compiled) move from 65.00 MiB at 2.8.0 to 70.21 MiB at 2.9.1 (id torch:seq2seq_attention:compiled:footprint:2.8.0->2.9.1).

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


# ---- the workload: seq2seq_attention (PyTorch forum 'High GPU memory usage problem' (seq2seq + attention)) ----
import math

SIZE, DTYPE, SEED = 'small', 'float32', 0
CFG = {'E': 64, 'H': 128, 'A': 128, 'V': 2000, 'B': 16, 'T_src': 12, 'T_tgt': 12}
FIGURE = 'footprint'  # the figure the change is about
DISTRIBUTIONS = ['torch', 'numpy']


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def take(x, indices, axis=0):
    """Gather along `axis`: nn.Embedding's op for a 2-D table, else index_select."""
    axis = axis % x.ndim
    if axis == 0 and x.ndim == 2:
        return F.embedding(indices, x)
    flat = torch.index_select(x, axis, indices.reshape(-1))
    return flat.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1:])


BOS = 0


def init(rng, cfg, dtype):
    c = cfg
    E, H, A, V, B = (c['E'], c['H'], c['A'], c['V'], c['B'])

    def dense(fan_in, fan_out):
        return rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)
    params = {'src_emb': rng.standard_normal((V, E)), 'tgt_emb': rng.standard_normal((V, E)), 'enc_W': dense(E, 3 * H), 'enc_U': dense(H, 3 * H), 'enc_b': 0.1 * rng.standard_normal(3 * H), 'att_Wk': dense(H, A), 'att_Wq': dense(H, A), 'att_v': dense(A, 1), 'dec_W': dense(E + H, 3 * H), 'dec_U': dense(H, 3 * H), 'dec_b': 0.1 * rng.standard_normal(3 * H), 'out_W': dense(H, V), 'out_b': 0.1 * rng.standard_normal(V)}
    params = {k: v.astype(dtype) for k, v in params.items()}
    src = rng.integers(1, V, size=(c['T_src'], B))
    tgt = rng.integers(1, V, size=(c['T_tgt'], B))
    dec_in = np.concatenate([np.full((1, B), BOS), tgt[:-1]], axis=0)
    inputs = {'src': src.reshape(-1), 'dec_in': dec_in.reshape(-1), 'target_flat': np.arange(tgt.size) * V + tgt.reshape(-1), 'h0': np.zeros((B, H), dtype=dtype)}
    return (params, inputs)


def _gru(gi, h, U, H):
    """One GRU step from the input-side pre-activations gi (B, 3H) and state h (B, H)."""
    gh = h @ U
    gate = lambda g, k: g[..., k * H:(k + 1) * H]
    r = torch.sigmoid(gate(gi, 0) + gate(gh, 0))
    z = torch.sigmoid(gate(gi, 1) + gate(gh, 1))
    n = torch.tanh(gate(gi, 2) + r * gate(gh, 2))
    return n + z * (h - n)


def loss(params, inputs, cfg):
    E, H, A, V, B = (cfg['E'], cfg['H'], cfg['A'], cfg['V'], cfg['B'])
    Ts, Tt = (cfg['T_src'], cfg['T_tgt'])
    p = params
    x = take(p['src_emb'], inputs['src'])
    gi_all = torch.reshape(x @ p['enc_W'] + p['enc_b'], (Ts, B, 3 * H))
    h = inputs['h0']
    states = []
    for t in range(Ts):
        h = _gru(gi_all[t], h, p['enc_U'], H)
        states.append(h)
    enc = torch.stack(states, dim=1)
    keys = torch.reshape(torch.reshape(enc, (B * Ts, H)) @ p['att_Wk'], (B, Ts, A))
    y = torch.reshape(take(p['tgt_emb'], inputs['dec_in']), (Tt, B, E))
    s = h
    outputs = []
    for t in range(Tt):
        query = torch.reshape(s @ p['att_Wq'], (B, 1, A))
        energy = torch.tanh(keys + query)
        scores = torch.reshape(torch.reshape(energy, (B * Ts, A)) @ p['att_v'], (B, Ts))
        weights = torch.softmax(scores, dim=-1)
        context = torch.reshape(torch.reshape(weights, (B, 1, Ts)) @ enc, (B, H))
        step_in = torch.cat([y[t], context], dim=-1)
        gi = step_in @ p['dec_W'] + p['dec_b']
        s = _gru(gi, s, p['dec_U'], H)
        outputs.append(s)
    states = torch.reshape(torch.stack(outputs), (Tt * B, H))
    logits = states @ p['out_W'] + p['out_b']
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picked = take(torch.reshape(log_probs, (-1,)), inputs['target_flat'])
    return -torch.mean(picked)


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
