"""Shapes and indexing: reshape, permute_dims, concat, stack, getitem (views and
copies, linear: their VJPs save shapes only), take and where (their indices and
condition are data, never differentiated). Each forward with its VJP below it."""

import numbers

from harness.engine.prims.common import Scatter, unbroadcast_f, zero
from harness.engine.saving import save
from harness.engine.tape import defvjp, defvjp_argnum, primitive
from harness.engine.xp import array_module as xp_of
from harness.engine.xp import is_array


@primitive(structural=True, remakeable=True)
def reshape(x, shape):
    return x.reshape(shape)


def _reshape_vjp(out, x, shape):
    x_shape = x.shape
    return lambda g: g.reshape(x_shape)


defvjp(reshape, _reshape_vjp)


@primitive(structural=True, remakeable=True)
def permute_dims(x, axes):
    return x.transpose(axes)


def _permute_vjp(out, x, axes):
    inverse = tuple(sorted(range(x.ndim), key=lambda i: axes[i] % x.ndim))
    vjp = lambda g: g.transpose(inverse)
    # x's gradient seen as this output is laid out: a consumer's VJP that adds into it
    # adds g.transpose(inverse) into x's gradient, and this node need not run
    # (backward._through_view: a Linear's W^T taken per use accumulates straight into W).
    vjp.input_view = lambda acc: acc.transpose(axes)
    return vjp


defvjp(permute_dims, _permute_vjp)


# concat and stack take a sequence, as the op set says; their primitives take the
# arrays as separate operands, so that each one can be traced


def concat(xs, axis=0):
    """Join a sequence of arrays along an existing axis."""
    return _concat(*xs, axis=axis)


@primitive(n_arrays=None, structural=True, remakeable=True)
def _concat(*xs, axis=0):
    return xp_of(*xs).concatenate(xs, axis=axis)


def _concat_vjp(argnum, out, *xs, axis=0):
    axis = axis % out.ndim
    start = 0
    for x in xs[:argnum]:
        start += x.shape[axis]
    index = (slice(None),) * axis + (slice(start, start + xs[argnum].shape[axis]),)
    return lambda g: g[index]


defvjp_argnum(_concat, _concat_vjp)


def stack(xs, axis=0):
    """Join a sequence of arrays along a new axis."""
    return _stack(*xs, axis=axis)


@primitive(n_arrays=None, structural=True, remakeable=True)
def _stack(*xs, axis=0):
    return xp_of(*xs).stack(xs, axis=axis)


def _stack_vjp(argnum, out, *xs, axis=0):
    index = (slice(None),) * (axis % out.ndim) + (argnum,)
    return lambda g: g[index]


defvjp_argnum(_stack, _stack_vjp)


@primitive(structural=True, remakeable=True)
def getitem(x, key):
    for k in key if isinstance(key, tuple) else (key,):
        if not _is_basic_index(k):
            raise TypeError(
                f"only basic indexing (ints, slices, Ellipsis, None) is supported, got "
                f"{type(k).__name__} in the key; use take() for integer-array indexing"
            )
    return x[key]


def _is_basic_index(k):
    if k is None or k is Ellipsis or isinstance(k, slice):
        return True
    return isinstance(k, numbers.Integral) and not isinstance(k, bool)


def _getitem_vjp(out, x, key):
    shape, dtype = x.shape, x.dtype
    return lambda g: Scatter(shape, dtype, key, g, repeated=False)


defvjp(getitem, _getitem_vjp)


# ---- indexing by data ------------------------------------------------------------------------


@primitive(n_arrays=2, nondiff=(1,))
def take(x, indices, axis=0):
    indices = xp_of(x).asarray(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be an integer array, got {indices.dtype}")
    return xp_of(x).take(x, indices, axis=axis)


def _take_vjp(out, x, indices, axis=0):
    shape, dtype = x.shape, x.dtype
    index = (slice(None),) * (axis % x.ndim) + (save(xp_of(x).asarray(indices), "take: where g scatters to"),)
    return lambda g: Scatter(shape, dtype, index, g, repeated=True)


defvjp(take, _take_vjp, None)


@primitive(n_arrays=3, nondiff=(0,))
def where(cond, x, y):
    if not is_array(cond) or cond.dtype.kind != "b":
        raise TypeError(f"cond must be a boolean array, got {getattr(cond, 'dtype', type(cond).__name__)}")
    return xp_of(cond, x, y).where(cond, x, y)


def _where_vjp(argnum, out, cond, x, y):
    cond = save(cond, "where: which side g goes to")
    if argnum == 1:
        return unbroadcast_f(x, lambda g: xp_of(g).where(cond, g, zero(g)))
    return unbroadcast_f(y, lambda g: xp_of(g).where(cond, zero(g), g))


defvjp_argnum(where, _where_vjp)
