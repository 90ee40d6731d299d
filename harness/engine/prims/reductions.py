"""Reductions (sum, mean, max) and the running sum (cumsum), each forward with its VJP
below it. This module's `sum` and `max` are the primitives, not Python's."""

import math
import numbers

from harness.engine.prims.common import kept_shape, normalize_axes
from harness.engine.saving import save, value
from harness.engine.tape import defvjp, primitive
from harness.engine.xp import array_module as xp_of


@primitive()
def sum(x, axis=None, keepdims=False):
    return xp_of(x).sum(x, axis=axis, keepdims=keepdims)


def _sum_vjp(out, x, axis=None, keepdims=False):
    shape, keep = x.shape, kept_shape(x.shape, axis)
    # A broadcast view of g, not a copy: consumers read it, accumulation copies it.
    return lambda g: xp_of(g).broadcast_to(g.reshape(keep), shape)


defvjp(sum, _sum_vjp)


@primitive()
def mean(x, axis=None, keepdims=False):
    return xp_of(x).mean(x, axis=axis, keepdims=keepdims)


def _mean_vjp(out, x, axis=None, keepdims=False):
    shape, keep = x.shape, kept_shape(x.shape, axis)
    count = math.prod(shape[a] for a in normalize_axes(axis, x.ndim))  # a Python int
    return lambda g: xp_of(g).broadcast_to(g.reshape(keep) / count, shape)


defvjp(mean, _mean_vjp)


@primitive()
def max(x, axis=None, keepdims=False):
    return xp_of(x).max(x, axis=axis, keepdims=keepdims)


def _max_vjp(out, x, axis=None, keepdims=False):
    keep, axes = kept_shape(x.shape, axis), normalize_axes(axis, x.ndim)
    x, out = save(x, "max: where x == max"), save(out, "max: where x == max")

    def vjp(g):
        chosen = value(x) == value(out).reshape(keep)  # ties share the gradient, as torch.amax, jax
        count = chosen.sum(axis=axes, keepdims=True, dtype=g.dtype)
        return chosen * (g.reshape(keep) / count)

    return vjp


defvjp(max, _max_vjp)


@primitive()
def cumsum(x, axis):
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an int, got {axis!r}")
    return xp_of(x).cumsum(x, axis=axis)


def _cumsum_vjp(out, x, axis):
    # The transpose of an inclusive running sum is the running sum from the other end.
    def vjp(g):
        xp = xp_of(g)
        return xp.flip(xp.cumsum(xp.flip(g, axis), axis=axis), axis)

    return vjp


defvjp(cumsum, _cumsum_vjp)
