"""Checking the engine: gradients against finite differences, peaks against tracemalloc.

`check_grads` is HIPS autograd's check, in float64: for a random cotangent u on the
output and a random direction v on the inputs,

    exact   = <v, VJP(u)>                                     one reverse pass
    numeric = (<u, f(x + eps v)> - <u, f(x - eps v)>) / 2 eps  two forward passes

are both the derivative of <u, f> along v, so they agree if and only if the VJP is
right (up to O(eps^2) truncation and rounding). One random projection checks every
entry of the Jacobian at once with probability 1.
"""

import tracemalloc

import numpy as np

from harness.engine.api import vjp


def check_grads(f, *args, argnums=None, order="heap", eps=1e-6, rtol=1e-6, atol=1e-9, seed=0):
    """Raise AssertionError unless f's reverse-mode derivative matches central
    differences. Floating arrays (and dicts of them) are cast to float64; `argnums`
    defaults to every floating argument; others (indices, masks) pass unchanged."""
    rng = np.random.default_rng(seed)
    args = [_to_float64(a) for a in args]
    if argnums is None:
        argnums = tuple(i for i, a in enumerate(args) if _is_floating(a))
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    out, backward = vjp(f, *args, argnums=argnums, order=order)
    u = np.asarray(rng.standard_normal(np.shape(out)))
    grads = backward(u)
    directions = [_map(lambda a: rng.standard_normal(a.shape), args[i]) for i in argnums]
    exact = sum(_inner(g, v) for g, v in zip(grads, directions))

    def projected(step):
        shifted = list(args)
        for i, v in zip(argnums, directions):
            shifted[i] = _map2(lambda a, d: a + step * d, args[i], v)
        return float(np.sum(u * np.asarray(f(*shifted))))

    numeric = (projected(eps) - projected(-eps)) / (2 * eps)
    if not np.isclose(exact, numeric, rtol=rtol, atol=atol):
        name = getattr(f, "__name__", repr(f))
        raise AssertionError(
            f"gradient check failed for {name}: reverse mode gives {exact!r}, central "
            f"differences {numeric!r} (relative error {abs(exact - numeric) / max(abs(numeric), 1e-300):.2e})"
        )


def tracemalloc_peak(fn, *args):
    """(fn(*args), peak bytes tracemalloc saw while it ran, above what was traced before).

    NumPy reports its data buffers to tracemalloc, so for a NumPy engine this is an
    independent measurement of the same thing the ledger counts, plus Python objects
    and the transients inside NumPy calls."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


def _is_floating(a):
    if isinstance(a, dict):
        return bool(a) and all(_is_floating(v) for v in a.values())
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _to_float64(a):
    if _is_floating(a):
        return _map(lambda v: v.astype(np.float64), a)
    return a


def _map(fn, a):
    return {k: fn(v) for k, v in a.items()} if isinstance(a, dict) else fn(a)


def _map2(fn, a, b):
    return {k: fn(v, b[k]) for k, v in a.items()} if isinstance(a, dict) else fn(a, b)


def _inner(a, b):
    if isinstance(a, dict):
        return sum(_inner(a[k], b[k]) for k in a)
    return float(np.sum(a * b))
