"""What the families' VJPs share: undoing a broadcast, the two marks by which a VJP
spares the backward pass a buffer, the slabs that piecewise work is cut into, axes,
and the sparse cotangent `Scatter`."""

import math

from harness.engine.saving import value
from harness.engine.xp import array_module as xp_of
from harness.engine.xp import is_array, scatter_add


def unbroadcast(g, shape):
    """Sum `g` over the axes NumPy broadcasting added or stretched, down to `shape`."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def unbroadcast_f(x, vjp):
    shape = x.shape  # the closure keeps the shape, not x
    if getattr(vjp, "reuses_g", False):
        return reuses_g(lambda g, into=None: unbroadcast(vjp(g, into), shape))
    return lambda g: unbroadcast(vjp(g), shape)


# ---- two ways a VJP can spare the pass a buffer (backward.py decides when to use them) ----


def reuses_g(vjp):
    """Mark a VJP ``vjp(g, into=None)`` whose cotangent is g-shaped and elementwise in g
    (element k reads g[k] only): given ``into=g`` it writes the cotangent into g's own
    buffer. The pass gives ``into=g`` only when g is its own and no other cotangent
    reads it any more; with None the VJP allocates its one array."""
    vjp.reuses_g = True
    return vjp


def adds_into(vjp):
    """Mark a VJP ``vjp(g, add_to=None)`` that can add its cotangent into `add_to`, the
    gradient the pass has accumulated so far for that operand (the pass's own buffer),
    making only a slab of it at a time. It returns add_to when it did, else a fresh
    cotangent for the pass to accumulate (with None, or where shapes do not line up)."""
    vjp.adds_into = True
    return vjp


def times(factor):
    """The VJP g -> g * factor (a saved array, remade if saved as a recipe, or a scalar)."""
    return reuses_g(lambda g, into=None: xp_of(g).multiply(g, value(factor), out=into))


def negated(g, into=None):
    return xp_of(g).negative(g, out=into)


reuses_g(negated)


def writable(a):
    """A NumPy result as an array that can be written in place (0-d results come back
    as scalars; augmented assignment works on both, `out=` needs an array)."""
    return a if is_array(a) else xp_of(a).asarray(a)


def zero(g):
    """A 0-d zero of g's dtype, on g's array module."""
    return xp_of(g).zeros((), dtype=g.dtype)


# ---- slabs ---------------------------------------------------------------------------------

SLABS = 8  # what is made piecewise (a contribution added into a gradient, a conv's rows) is made 1/8 at a time
MIN_SLAB_BYTES = 1 << 16  # ... in slabs of at least this (64 KiB): smaller ones cost more calls than the bytes they save


def slab_count(nbytes):
    """How many slabs to cut `nbytes` of piecewise work into: SLABS, fewer where that
    would make them smaller than MIN_SLAB_BYTES, at least one."""
    return max(1, min(SLABS, nbytes // MIN_SLAB_BYTES))


def slabs(shape, reduced=(), itemsize=None):
    """Index tuples cutting an array of `shape` into SLABS slabs along its
    longest axis not in `reduced` (the whole array when every axis is reduced).
    With `itemsize` (bytes per element of the slab-sized transient), fewer slabs
    where SLABS would make them smaller than MIN_SLAB_BYTES."""
    free = [a for a in range(len(shape)) if a not in reduced]
    if not free:
        return [Ellipsis]
    axis = max(free, key=lambda a: shape[a])
    count = SLABS if itemsize is None else slab_count(math.prod(shape) * itemsize)
    step = -(-shape[axis] // count)
    return [(slice(None),) * axis + (slice(i, i + step),) for i in range(0, shape[axis], step)]


# ---- axes ------------------------------------------------------------------------------------


def normalize_axes(axis, ndim):
    """None, an int or a tuple -> a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes))


def kept_shape(shape, axis):
    """The shape of a reduction over `axis` with keepdims=True."""
    axes = normalize_axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class Scatter:
    """A cotangent that is `values` at `index` of a zero array of `shape`: getitem's
    and take's VJPs return it, and the backward pass adds it straight into the
    gradient it accumulates into, instead of materialising a mostly-zero array per
    slice (HIPS autograd's `untake`, #219)."""

    __slots__ = ("shape", "dtype", "index", "values", "repeated")

    def __init__(self, shape, dtype, index, values, repeated):
        self.shape, self.dtype, self.index, self.values = shape, dtype, index, values
        self.repeated = repeated  # the index may repeat (take): add each occurrence

    def add_into(self, target):
        if self.repeated:
            scatter_add(target, self.index, self.values)
        else:
            view = target[self.index]  # basic indexing: a view, added into in place
            view += self.values
