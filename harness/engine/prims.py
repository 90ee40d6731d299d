"""Every primitive: its forward on raw arrays and, right below, its VJP.

A VJP maker has the signature ``(out, *args, **params) -> (g -> cotangent)``. It runs
at forward time, and only for arguments that need a gradient. Every array the inner
closure reads goes through ``save(x, why)`` in the maker, where `why` names the formula
that reads it (the ledger notes it against the buffer), and is read back with
``value(saved)``; shapes are taken outside the closure, so that nothing else is kept
(docs/engine.md, "Saved"):

  shapes only   add sub neg sum mean reshape permute_dims getitem concat stack
                upsample2d cumsum
  the output    exp sqrt tanh sigmoid relu softmax
  the input     log sin cos logsumexp, and mul/div/matmul/conv2d save the *other*
                operand, and only when this one needs a gradient
  both          max, max_pool2d, div's divisor (out, y)
  data          take its indices, where its condition (never differentiated)

`save` keeps an array that is a copy, view or sum of arrays kept anyway (a
concatenation, an upsampled map, h - n) as those arrays, and remakes it when the VJP
runs; the `remakeable` prims below are the ones whose outputs can be kept that way
(saving.py). max_pool2d saves its input and its output (the neighbouring convs' saved
maps anyway), not indices: its VJP finds each window's first maximum again.

A VJP allocates at most one array per cotangent (docs/engine.md, "Transients"): intermediate
steps are done in place in that array, and two kinds of VJP can do without even that:

  reuses_g    neg mul div exp log sqrt relu (elementwise in g): handed the incoming
              cotangent's own buffer when nothing else reads it any more, they write
              their cotangent over it
  adds_into   matmul logsumexp: handed the gradient the pass has accumulated so far
              for their operand, they add their cotangent into it a slab at a time,
              so a second, third... contribution to a shared weight never exists whole

An elementwise chain inside a VJP is one `Fused`: one kernel launch on CuPy, the
in-place NumPy sequence on the CPU.

Every residual is an operand or the output (or, kept as a recipe, operands of those):
no hidden array is saved, so the ledger, which sees operands and outputs, sees every
saved byte.

Constants are Python scalars or have the cotangent's dtype, so float32 stays float32
under NumPy 2 (NEP 50: a float64 or int64 *array* would upcast). VJPs run on raw
arrays, never on traced values: the backward pass is not recorded.
"""

import builtins
import itertools
import math
import numbers

import numpy as np

from harness.engine.blas import add_product
from harness.engine.saving import Rebuilt, copy_rows, input_rows, save, value
from harness.engine.tape import Var, defvjp, defvjp_argnum, primitive
from harness.engine.xp import Fused
from harness.engine.xp import array_module as xp_of
from harness.engine.xp import is_array, scatter_add


# ---- helpers -------------------------------------------------------------------------


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


# Two ways a VJP can spare the pass a buffer (backward.py decides when to use them):


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


SLABS = 8  # what is made piecewise (a contribution added into a gradient, a conv's rows) is made 1/8 at a time
MIN_SLAB_BYTES = 1 << 16  # ... in slabs of at least this (64 KiB): smaller ones cost more calls than the bytes they save


def slabs(shape, reduced=(), itemsize=None):
    """Index tuples cutting an array of `shape` into SLABS slabs along its
    longest axis not in `reduced` (the whole array when every axis is reduced).
    With `itemsize` (bytes per element of the slab-sized transient), fewer slabs
    where SLABS would make them smaller than MIN_SLAB_BYTES."""
    free = [a for a in range(len(shape)) if a not in reduced]
    if not free:
        return [Ellipsis]
    axis = builtins.max(free, key=lambda a: shape[a])
    count = SLABS
    if itemsize is not None:
        count = builtins.max(1, builtins.min(SLABS, math.prod(shape) * itemsize // MIN_SLAB_BYTES))
    step = -(-shape[axis] // count)
    return [(slice(None),) * axis + (slice(i, i + step),) for i in range(0, shape[axis], step)]


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


# ---- elementwise, broadcasting; either operand may be a Python scalar ------------------


# `writes_into`: the same forward writing into a given buffer (tape.donated)


@primitive(n_arrays=2, remakeable=True, writes_into=lambda x, y, out: xp_of(x, y).add(x, y, out=out))
def add(x, y):
    return xp_of(x, y).add(x, y)


@primitive(n_arrays=2, remakeable=True, writes_into=lambda x, y, out: xp_of(x, y).subtract(x, y, out=out))
def sub(x, y):
    return xp_of(x, y).subtract(x, y)


@primitive(n_arrays=2, remakeable=True)
def mul(x, y):
    return xp_of(x, y).multiply(x, y)


@primitive(n_arrays=2)
def div(x, y):
    return xp_of(x, y).true_divide(x, y)


def _div_grad_y_numpy(g, o, y, out=None):  # -g * out / y, in one buffer
    t = xp_of(g).multiply(g, o, out=out)
    t /= y
    t *= -1
    return t


_div_grad_y = Fused("div_grad_y", ("g", "o", "y"), "-g * o / y", _div_grad_y_numpy)


def _div_vjp_y(out, x, y):
    shape = y.shape
    out, y = save(out, "div: y's gradient -g out / y"), save(y, "div: y's gradient -g out / y")
    return reuses_g(lambda g, into=None: unbroadcast(_div_grad_y(g, value(out), value(y), out=into), shape))


def _sub_vjp_y(out, x, y):
    shape = y.shape

    def vjp(g, into=None):
        if g.shape == shape:
            return negated(g, into)
        return -unbroadcast(g, shape)  # summed first: -g is never made whole

    return reuses_g(vjp)


defvjp(add, lambda out, x, y: unbroadcast_f(x, lambda g: g),
            lambda out, x, y: unbroadcast_f(y, lambda g: g))  # fmt: skip
defvjp(sub, lambda out, x, y: unbroadcast_f(x, lambda g: g),
            _sub_vjp_y)  # fmt: skip
def _div_vjp_x(out, x, y):
    y = save(y, "div: x's gradient g / y")
    return unbroadcast_f(x, reuses_g(lambda g, into=None: xp_of(g).true_divide(g, value(y), out=into)))


defvjp(mul, lambda out, x, y: unbroadcast_f(x, times(save(y, "mul: x's gradient g y"))),
            lambda out, x, y: unbroadcast_f(y, times(save(x, "mul: y's gradient g x"))))  # fmt: skip
defvjp(div, _div_vjp_x, _div_vjp_y)


# ---- unary ---------------------------------------------------------------------------


@primitive(remakeable=True, writes_into=lambda x, out: xp_of(x).negative(x, out=out))
def neg(x):
    return xp_of(x).negative(x)


@primitive(writes_into=lambda x, out: xp_of(x).exp(x, out=out))
def exp(x):
    return xp_of(x).exp(x)


@primitive()
def log(x):
    return xp_of(x).log(x)


@primitive(writes_into=lambda x, out: xp_of(x).sqrt(x, out=out))
def sqrt(x):
    return xp_of(x).sqrt(x)


@primitive(writes_into=lambda x, out: xp_of(x).tanh(x, out=out))
def tanh(x):
    return xp_of(x).tanh(x)


@primitive(writes_into=lambda x, out: _sigmoid(x, out=out))
def sigmoid(x):
    # 1/(1+exp(-x)) overflows for x << 0; this identity does not, in one buffer.
    return _sigmoid(x)


def _sigmoid_numpy(x, out=None):
    y = np.asarray(np.multiply(x, 0.5, out=out))  # a 0-d operand gives a scalar, not an array
    np.tanh(y, out=y)
    y += 1
    y *= 0.5
    return y


_sigmoid = Fused("sigmoid", ("x",), "(tanh(x * 0.5) + 1) * 0.5", _sigmoid_numpy)


def _relu_into(x, out=None):
    """max(x, 0) into `out` (a new array if None). NumPy's maximum against the scalar 0
    (a stride-0 operand) is 2-3x slower than against a contiguous row of zeros (unet's
    (2, 8, 64, 64) maps: 20 -> 8 us; a (4096, 256) float32 array: 310 -> 140 us), so a
    contiguous x is taken as rows of ZERO_ROW elements against one cached row: the same
    ufunc, the same numbers (NaN kept)."""
    xp = xp_of(x)
    if type(x) is not np.ndarray:  # a CuPy array, a NumPy scalar
        return xp.maximum(x, 0, out=out)
    if out is None:
        out = np.empty_like(x)
    if x.size % ZERO_ROW == 0 and x.flags.c_contiguous and out.flags.c_contiguous:
        zeros = _zero_rows.get(x.dtype)
        if zeros is None:
            zeros = _zero_rows[x.dtype] = np.zeros(ZERO_ROW, dtype=x.dtype)
        np.maximum(x.reshape(-1, ZERO_ROW), zeros, out=out.reshape(-1, ZERO_ROW))
        return out
    return np.maximum(x, 0, out=out)


ZERO_ROW = 256  # elements: rows this long take NumPy's contiguous loop, the cached rows stay tiny
_zero_rows = {}  # dtype -> a ZERO_ROW row of zeros


@primitive(writes_into=_relu_into)
def relu(x):
    return _relu_into(x)


# sin and cos are remakeable: one transcendental per element is cheap beside keeping
# an array (tiny_nerf's positional encoding is remade for the weight gradients it feeds)
@primitive(remakeable=True)
def sin(x):
    return xp_of(x).sin(x)


@primitive(remakeable=True)
def cos(x):
    return xp_of(x).cos(x)


# Each derivative below is one Fused chain: one kernel on CuPy, the NumPy function
# (at most one array made) on the CPU.


def _sqrt_grad_numpy(g, o, out=None):  # g * 0.5 / out
    t = np.multiply(g, 0.5, out=out)
    t /= o
    return t


def _tanh_grad_numpy(g, o, out=None):  # g * (1 - out**2), in one buffer
    t = writable(o * o)
    np.subtract(1, t, out=t)
    t *= g
    return t


def _sigmoid_grad_numpy(g, o, out=None):  # g * out * (1 - out), in one buffer
    t = writable(1 - o)
    t *= o
    t *= g
    return t


def _relu_grad_numpy(g, o, out=None):
    # The mask is made a slab at a time (a 1-byte-per-element transient for the whole
    # array otherwise).
    out = np.empty(g.shape, dtype=g.dtype) if out is None else out
    for b in slabs(g.shape, itemsize=1):
        np.multiply(g[b], o[b] > 0, out=out[b])
    return out


def _sin_grad_numpy(g, x, out=None):  # g * cos(x)
    t = writable(np.cos(x))
    t *= g
    return t


def _cos_grad_numpy(g, x, out=None):  # -g * sin(x)
    t = writable(np.sin(x))
    t *= g
    t *= -1
    return t


_sqrt_grad = Fused("sqrt_grad", ("g", "o"), "g * 0.5 / o", _sqrt_grad_numpy)
_tanh_grad = Fused("tanh_grad", ("g", "o"), "g * (1 - o * o)", _tanh_grad_numpy)
_sigmoid_grad = Fused("sigmoid_grad", ("g", "o"), "g * o * (1 - o)", _sigmoid_grad_numpy)
_relu_grad = Fused("relu_grad", ("g", "o"), "g * (o > 0)", _relu_grad_numpy)  # 0 at the kink, as torch
_sin_grad = Fused("sin_grad", ("g", "x"), "g * cos(x)", _sin_grad_numpy)
_cos_grad = Fused("cos_grad", ("g", "x"), "-g * sin(x)", _cos_grad_numpy)


def _sqrt_vjp(out, x):
    out = save(out, "sqrt: g / (2 out)")
    return reuses_g(lambda g, into=None: _sqrt_grad(g, value(out), out=into))


def _tanh_vjp(out, x):
    out = save(out, "tanh: g (1 - out^2)")
    return lambda g: _tanh_grad(g, value(out))


def _sigmoid_vjp(out, x):
    out = save(out, "sigmoid: g out (1 - out)")
    return lambda g: _sigmoid_grad(g, value(out))


def _relu_vjp(out, x):
    # relu saves its output, not a mask: the output is saved anyway, as the next
    # matmul's or conv's input (one buffer for both).
    out = save(out, "relu: g (out > 0)")
    return reuses_g(lambda g, into=None: _relu_grad(g, value(out), out=into))


def _sin_vjp(out, x):
    x = save(x, "sin: g cos(x)")
    return lambda g: _sin_grad(g, value(x))


def _cos_vjp(out, x):
    x = save(x, "cos: -g sin(x)")
    return lambda g: _cos_grad(g, value(x))


defvjp(neg,     lambda out, x: negated)
def _log_vjp(out, x):
    x = save(x, "log: g / x")
    return reuses_g(lambda g, into=None: xp_of(g).true_divide(g, value(x), out=into))


defvjp(exp,     lambda out, x: times(save(out, "exp: g out")))
defvjp(log,     _log_vjp)
defvjp(sqrt,    _sqrt_vjp)
defvjp(tanh,    _tanh_vjp)
defvjp(sigmoid, _sigmoid_vjp)
defvjp(relu,    _relu_vjp)
defvjp(sin,     _sin_vjp)
defvjp(cos,     _cos_vjp)  # fmt: skip


# ---- linear algebra --------------------------------------------------------------------


@primitive(n_arrays=2)
def matmul(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("operands must be at least 2-D: (..., m, k) @ (..., k, n)")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    return xp_of(a, b).matmul(a, b)


def _matmul_vjp_a(out, a, b):
    a_shape = a.shape
    b = save(b, "matmul: a's gradient g b^T")
    return adds_into(lambda g, add_to=None: product_cotangent(g, value(b).swapaxes(-1, -2), a_shape, add_to))


def _matmul_vjp_b(out, a, b):
    b_shape = b.shape
    a = save(a, "matmul: b's gradient a^T g")
    if b.ndim == 2:
        # A 2-D weight: fold a's batch into the contraction, one (k, n) result instead
        # of a (batch, k, n) one summed afterwards; a concatenation along k makes its
        # rows of the gradient part by part, never remade whole.
        def vjp(g, add_to=None):
            g = g.reshape(-1, g.shape[-1])
            parts = a.parts(-1) if type(a) is Rebuilt else None
            if parts is None:
                av = value(a)
                return product_cotangent(av.reshape(-1, av.shape[-1]).T, g, b_shape, add_to)
            grad = xp_of(g).empty(b_shape, dtype=g.dtype) if add_to is None else add_to
            for start, stop, part in parts:
                rows = value(part).reshape(-1, stop - start).T
                if add_to is None:
                    xp_of(g).matmul(rows, g, out=grad[start:stop])
                else:
                    add_matmul(grad[start:stop], rows, g)
            return grad

        return adds_into(vjp)
    return adds_into(lambda g, add_to=None: product_cotangent(value(a).swapaxes(-1, -2), g, b_shape, add_to))


def product_cotangent(left, right, shape, add_to):
    """``left @ right`` as the cotangent of an operand of `shape` (summed over the batch
    dimensions broadcasting added). With `add_to`, the gradient accumulated so far for
    that operand, and no broadcast to undo, it is added into add_to (add_matmul: one
    gemm, or a slab at a time), so the contribution never exists whole. Returns add_to,
    or a fresh array."""
    if add_to is None:
        return unbroadcast(product(left, right), shape)
    batch = () if left.ndim == right.ndim == 2 else np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    if batch + (left.shape[-2], right.shape[-1]) != shape:
        return unbroadcast(product(left, right), shape)
    return add_matmul(add_to, left, right)


def product(left, right):
    """left @ right. A contraction of length 1 (an outer product: attention's (B T, 1)
    scores) is a broadcast multiply, the same numbers: NumPy's matmul makes it without
    BLAS, 3-40x slower."""
    if left.shape[-1] == 1:
        return xp_of(left, right).multiply(left, right)
    return left @ right


def add_matmul(acc, left, right):
    """acc += left @ right: BLAS's C += A B, one gemm with beta = 1 where NumPy's BLAS
    is at hand (blas.py: no transient at all). Else an eighth of the product at a time,
    a slab as the transient instead of the whole product (fewer slabs, none under
    MIN_SLAB_BYTES, for a small product: one call per slab costs more than the transient
    saves). Slabs of columns unless the product is taller than wide (with 2 OpenBLAS
    threads, slabs of a square product's rows ran 2-5x slower than slabs of columns)."""
    if add_product(acc, left, right):
        return acc
    count = builtins.max(1, builtins.min(SLABS, acc.nbytes // MIN_SLAB_BYTES))
    if count == 1:
        acc += product(left, right)
    elif acc.shape[-2] > acc.shape[-1]:
        step = -(-acc.shape[-2] // count)
        for i in range(0, acc.shape[-2], step):
            rows = acc[..., i : i + step, :]  # (a view: `acc[...] += x` would also set it back)
            rows += product(left[..., i : i + step, :], right)
    else:
        step = -(-acc.shape[-1] // count)
        for i in range(0, acc.shape[-1], step):
            columns = acc[..., i : i + step]
            columns += product(left, right[..., i : i + step])
    return acc


defvjp(matmul, _matmul_vjp_a, _matmul_vjp_b)


# ---- reductions ------------------------------------------------------------------------


@primitive()
def sum(x, axis=None, keepdims=False):
    return xp_of(x).sum(x, axis=axis, keepdims=keepdims)


@primitive()
def mean(x, axis=None, keepdims=False):
    return xp_of(x).mean(x, axis=axis, keepdims=keepdims)


@primitive()
def max(x, axis=None, keepdims=False):
    return xp_of(x).max(x, axis=axis, keepdims=keepdims)


def _sum_vjp(out, x, axis=None, keepdims=False):
    shape, keep = x.shape, kept_shape(x.shape, axis)
    # A broadcast view of g, not a copy: consumers read it, accumulation copies it.
    return lambda g: xp_of(g).broadcast_to(g.reshape(keep), shape)


def _mean_vjp(out, x, axis=None, keepdims=False):
    shape, keep = x.shape, kept_shape(x.shape, axis)
    count = math.prod(shape[a] for a in normalize_axes(axis, x.ndim))  # a Python int
    return lambda g: xp_of(g).broadcast_to(g.reshape(keep) / count, shape)


def _max_vjp(out, x, axis=None, keepdims=False):
    keep, axes = kept_shape(x.shape, axis), normalize_axes(axis, x.ndim)
    x, out = save(x, "max: where x == max"), save(out, "max: where x == max")

    def vjp(g):
        chosen = value(x) == value(out).reshape(keep)  # ties share the gradient, as torch.amax, jax
        count = chosen.sum(axis=axes, keepdims=True, dtype=g.dtype)
        return chosen * (g.reshape(keep) / count)

    return vjp


defvjp(sum, _sum_vjp)
defvjp(mean, _mean_vjp)
defvjp(max, _max_vjp)


# ---- shape -----------------------------------------------------------------------------


@primitive(structural=True, remakeable=True)
def reshape(x, shape):
    return x.reshape(shape)


@primitive(structural=True, remakeable=True)
def permute_dims(x, axes):
    return x.transpose(axes)


@primitive(n_arrays=None, structural=True, remakeable=True)
def _concat(*xs, axis=0):
    return xp_of(*xs).concatenate(xs, axis=axis)


@primitive(n_arrays=None, structural=True, remakeable=True)
def _stack(*xs, axis=0):
    return xp_of(*xs).stack(xs, axis=axis)


def concat(xs, axis=0):
    """Join a sequence of arrays along an existing axis."""
    return _concat(*xs, axis=axis)


def stack(xs, axis=0):
    """Join a sequence of arrays along a new axis."""
    return _stack(*xs, axis=axis)


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


def _concat_vjp(argnum, out, *xs, axis=0):
    axis = axis % out.ndim
    start = 0
    for x in xs[:argnum]:
        start += x.shape[axis]
    index = (slice(None),) * axis + (slice(start, start + xs[argnum].shape[axis]),)
    return lambda g: g[index]


def _stack_vjp(argnum, out, *xs, axis=0):
    index = (slice(None),) * (axis % out.ndim) + (argnum,)
    return lambda g: g[index]


def _getitem_vjp(out, x, key):
    shape, dtype = x.shape, x.dtype
    return lambda g: Scatter(shape, dtype, key, g, repeated=False)


def _reshape_vjp(out, x, shape):
    x_shape = x.shape
    return lambda g: g.reshape(x_shape)


def _permute_vjp(out, x, axes):
    inverse = tuple(sorted(range(x.ndim), key=lambda i: axes[i] % x.ndim))
    vjp = lambda g: g.transpose(inverse)
    # x's gradient seen as this output is laid out: a consumer's VJP that adds into it
    # adds g.transpose(inverse) into x's gradient, and this node need not run
    # (backward._through_view: a Linear's W^T taken per use accumulates straight into W).
    vjp.input_view = lambda acc: acc.transpose(axes)
    return vjp


defvjp(reshape, _reshape_vjp)
defvjp(permute_dims, _permute_vjp)
defvjp_argnum(_concat, _concat_vjp)
defvjp_argnum(_stack, _stack_vjp)
defvjp(getitem, _getitem_vjp)


# ---- indexing --------------------------------------------------------------------------


@primitive(n_arrays=2, nondiff=(1,))
def take(x, indices, axis=0):
    indices = xp_of(x).asarray(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be an integer array, got {indices.dtype}")
    return xp_of(x).take(x, indices, axis=axis)


@primitive(n_arrays=3, nondiff=(0,))
def where(cond, x, y):
    if not is_array(cond) or cond.dtype.kind != "b":
        raise TypeError(f"cond must be a boolean array, got {getattr(cond, 'dtype', type(cond).__name__)}")
    return xp_of(cond, x, y).where(cond, x, y)


def _take_vjp(out, x, indices, axis=0):
    shape, dtype = x.shape, x.dtype
    index = (slice(None),) * (axis % x.ndim) + (save(xp_of(x).asarray(indices), "take: where g scatters to"),)
    return lambda g: Scatter(shape, dtype, index, g, repeated=True)


def _where_vjp(argnum, out, cond, x, y):
    cond = save(cond, "where: which side g goes to")
    if argnum == 1:
        return unbroadcast_f(x, lambda g: xp_of(g).where(cond, g, _zero(g)))
    return unbroadcast_f(y, lambda g: xp_of(g).where(cond, _zero(g), g))


def _zero(g):
    return xp_of(g).zeros((), dtype=g.dtype)


defvjp(take, _take_vjp, None)
defvjp_argnum(where, _where_vjp)


# ---- neural-network ops ----------------------------------------------------------------


@primitive()
def softmax(x, axis=-1):
    xp = xp_of(x)
    e = x - _finite_max(x, axis)
    xp.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


@primitive()
def logsumexp(x, axis=-1, keepdims=False):
    out = _logsumexp_kept(x, axis)
    return out if keepdims else out.reshape(_reduced_shape(x.shape, axis))


def _logsumexp_kept(x, axis):
    xp = xp_of(x)
    m = _finite_max(x, axis)
    e = x - m
    xp.exp(e, out=e)
    out = xp.log(e.sum(axis=axis, keepdims=True))
    out += m
    return out


def _reduced_shape(shape, axis):
    axes = normalize_axes(axis, len(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _finite_max(x, axis):
    """max over axis (kept), with -inf/nan replaced by 0 so that x - max stays finite."""
    xp = xp_of(x)
    m = x.max(axis=axis, keepdims=True)
    return xp.where(xp.isfinite(m), m, _zero(m))


def _softmax_vjp(out, x, axis=-1):
    out = save(out, "softmax: out (g - <g, out>)")

    def vjp(g):
        o = value(out)
        return o * (g - (g * o).sum(axis=axis, keepdims=True))

    return vjp


def _logsumexp_vjp(out, x, axis=-1, keepdims=False):
    # Saves x, not its output: each slab's softmax is made again from x (a reduction
    # over rows the slab holds whole), so no (rows, 1) array is kept for the backward.
    keep, axes, shape = kept_shape(x.shape, axis), normalize_axes(axis, x.ndim), x.shape
    x = save(x, "logsumexp: g exp(x - logsumexp(x))")

    def vjp(g, add_to=None):
        xv, gk = value(x), g.reshape(keep)

        def softmax_times_g(b):
            # exp(x - logsumexp(x)) g on the slab b, in one buffer: p = exp(x - max), then
            # p g / sum(p), so x is exponentiated once, not twice (logsumexp, then softmax)
            p = xv[b] - _finite_max(xv[b], axes)
            xp_of(p).exp(p, out=p)
            p *= gk[b] / p.sum(axis=axes, keepdims=True)
            return p

        if add_to is None:
            return softmax_times_g(Ellipsis)
        for b in slabs(shape, axes):
            slab = add_to[b]
            slab += softmax_times_g(b)
        return add_to

    return adds_into(vjp)


defvjp(softmax, _softmax_vjp)
defvjp(logsumexp, _logsumexp_vjp)


@primitive(n_arrays=2)
def conv2d(x, w, stride=1, padding=0):
    # Cross-correlation as kh*kw matmuls on the flattened padded image (`_correlate`).
    n, c, ho, wo, kh, kw = _conv_geometry(x, w, stride, padding)
    out = xp_of(x, w).empty((n, w.shape[0], ho, wo), dtype=x.dtype)
    return _correlate(x, lambda i, j: w[:, :, i, j], kh, kw, out, stride, padding, padding)


def _correlate(src, tap, kh, kw, out, stride=1, top=0, left=0, dilation=1):
    """out[:, :, y, x] = sum over i, j of tap(i, j) @ padded[:, :, stride y + i, stride x + j],
    `padded` being `src` (n, C, H, W) with its pixels `dilation` apart, shifted down by
    `top` rows and right by `left` columns into zeros (negative: cropped). tap(i, j) is
    an (O, C) matrix; out is (n, O, ho, wo), written and returned.

    Flattened with a row pitch of wp = stride (wo - 1) + kw, the pixels kernel offset
    (i, j) sees are one contiguous window starting at i*wp + j, so each offset is one
    BLAS call on a view: no im2col, no per-offset copy (but for a one-channel src,
    `_correlate_one_channel`). It is made at stride 1 on
    "wide" rows of wp pixels, of which the output keeps every stride-th, up to wo. The
    output rows are done an eighth at a time, so the padded rows and the wide result
    are slab-sized transients (conv2d's weight gradient walks the same slabs)."""
    n, o, ho, wo = out.shape
    wp = stride * (wo - 1) + kw
    xp = xp_of(out)
    # (offset of the window in the flat padded rows, tap matrix) per kernel offset
    windows = [(i * wp + j, tap(i, j)) for i, j in itertools.product(range(kh), range(kw))]
    if windows[0][1].shape[-1] == 1:
        offsets, taps = zip(*windows)
        return _correlate_one_channel(src, taps, offsets, kh, wp, out, stride, top, left, dilation)
    (first, tap0), *taps = windows

    term = None
    for rows in _row_slabs(ho, _wide_row_bytes(n, src.shape[1], o, wp, src.itemsize)):
        xs, count = _input_rows(src, rows, stride, kh, wp, top, left, dilation)
        span = count * wp
        wide = xp.matmul(tap0, xs[..., first : first + span])
        if term is None or term.shape != wide.shape:
            term = xp.empty_like(wide)  # each offset's product, made into one buffer and added
        for offset, t in taps:
            wide += xp.matmul(t, xs[..., offset : offset + span], out=term)
        out[:, :, rows] = _narrow(wide, stride, count, wp, wo)
        del xs, wide  # before the next slab's are made: term is the one buffer kept
    return out


def _correlate_one_channel(src, taps, offsets, kh, wp, out, stride, top, left, dilation):
    """_correlate of a one-channel src (a network's input image): each offset's product
    would be an outer product (K = 1), so the slab's kh*kw windows are copied side by side
    instead (the im2col of one channel: kh*kw rows of the slab, where the other path
    keeps a term buffer of O rows; the slab's height counts them) and multiplied in one
    product with K = kh*kw: unet's first conv, (8, 9) @ (9, 1056) per image and slab,
    3x faster than nine outer products and adds."""
    n, o, ho, wo = out.shape
    xp = xp_of(out)
    kernel = xp.stack([t[:, 0] for t in taps], axis=1)  # (O, kh*kw)
    for rows in _row_slabs(ho, _wide_row_bytes(n, len(taps), o, wp, src.itemsize)):
        xs, count = _input_rows(src, rows, stride, kh, wp, top, left, dilation)
        span = count * wp
        windows = xp.empty((n, len(taps), span), dtype=xs.dtype)
        for k, offset in enumerate(offsets):
            windows[:, k] = xs[:, 0, offset : offset + span]
        del xs
        out[:, :, rows] = _narrow(xp.matmul(kernel, windows), stride, count, wp, wo)
        del windows  # before the next slab's are made
    return out


def _conv_geometry(x, w, stride, padding):
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"expected a 4-D NCHW input and a 4-D OIHW weight, got shapes {x.shape} and {w.shape}")
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"input {x.shape} has {x.shape[1]} channels but weight {w.shape} expects {w.shape[1]}")
    if not (isinstance(stride, int) and stride >= 1 and isinstance(padding, int) and padding >= 0):
        raise ValueError(f"stride must be an int >= 1 and padding an int >= 0, got {stride!r} and {padding!r}")
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    ho, wo = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"kernel {w.shape[2:]} is larger than the padded input {x.shape[2:]}")
    return n, c, ho, wo, kh, kw


def _wide_row_bytes(n, c_in, c_out, wp, itemsize):
    """Bytes of one wide row, across the batch, of a conv's widest transient: its padded
    input rows (c_in channels) or its wide result (c_out), wp pixels each."""
    return n * builtins.max(c_in, c_out) * wp * itemsize


def _row_slabs(ho, row_bytes):
    """The output rows in at most SLABS slices, each with at least MIN_SLAB_BYTES bytes
    of wide rows (`row_bytes` per row across the batch): a small conv makes fewer BLAS
    calls (9 per slab and pass) for transients that stay under a few slabs' bytes."""
    count = builtins.max(1, builtins.min(SLABS, ho * row_bytes // MIN_SLAB_BYTES))
    step = -(-ho // count)
    return [slice(y, builtins.min(y + step, ho)) for y in range(0, ho, step)]


def _input_rows(x, rows, stride, kh, wp, top, left, dilation=1, xp=None):
    """The padded input rows the output `rows` read, flattened: (n, c, (count + kh) * wp),
    a fresh array, and count, the stride-1 rows from the slab's first output row to its
    last. Pixel (r, q) of x sits at padded row top + dilation r, column left +
    dilation q. Below the count rows: kh - 1 rows of halo and one spare row, which
    holds the last window's overrun (at most kw - 1 pixels)."""
    n, c, h, wd = x.shape
    first, count = stride * rows.start, stride * (rows.stop - 1 - rows.start) + 1
    xs = (xp or xp_of(x)).zeros((n, c, count + kh, wp), dtype=x.dtype)
    # the rows and columns of x that land inside the slab (first .. first + count + kh - 1)
    lo, hi = _inside(first - top, count + kh - 1, dilation, h)
    q_lo, q_hi = _inside(-left, wp, dilation, wd)
    if lo < hi and q_lo < q_hi:
        d = dilation
        inside = xs[:, :, top + d * lo - first : top + d * (hi - 1) - first + 1 : d,
                          left + d * q_lo : left + d * (q_hi - 1) + 1 : d]  # fmt: skip
        # x may be a saved recipe (a concatenation, an upsampled map): remade a slab at a
        # time, straight into the slab where every column lands in it
        if q_lo == 0 and q_hi == wd:
            copy_rows(x, lo, hi, inside)
        else:
            inside[...] = input_rows(x, lo, hi)[..., q_lo:q_hi]
    return xs.reshape(n, c, -1), count


def _inside(start, length, dilation, size):
    """The indices [lo, hi) of 0..size-1 whose position dilation * index falls in
    [start, start + length)."""
    lo = builtins.max(-(-start // dilation), 0)
    hi = builtins.min(-(-(start + length) // dilation), size)
    return lo, builtins.max(lo, hi)


def _all_windows(flat, kh, kw, count, wp):
    """Every kernel offset's window at once: a (n, kh, kw, c, count * wp) view of the
    flat padded rows (n, c, F), window (i, j) starting at i*wp + j (inside the buffer:
    the spare row holds the last one's overrun)."""
    n, c, _ = flat.shape
    s_n, s_c, s_p = flat.strides
    return xp_of(flat).lib.stride_tricks.as_strided(flat, (n, kh, kw, c, count * wp), (s_n, wp * s_p, s_p, s_c, s_p))


def _narrow(wide, stride, count, wp, wo):
    """The output pixels of `count` wide stride-1 rows: every stride-th row and column."""
    n, o = wide.shape[:2]
    return wide.reshape(n, o, count, wp)[:, :, ::stride, : stride * (wo - 1) + 1 : stride]


def _widen(g, stride, count, wp):
    """The inverse of _narrow for a cotangent slab g (n, o, rows, wo): zeros at the
    pixels the forward dropped, flattened to (n, o, count * wp)."""
    n, o, _, wo = g.shape
    wide = xp_of(g).zeros((n, o, count, wp), dtype=g.dtype)
    wide[:, :, ::stride, : stride * (wo - 1) + 1 : stride] = g
    return wide.reshape(n, o, -1)


def _conv2d_vjp_x(out, x, w, stride=1, padding=0):
    x_shape = x.shape
    w = save(w, "conv2d: x's gradient, the transposed conv of g with w")

    def vjp(g):
        # The transposed convolution, as a correlation like the forward's: g with its
        # pixels `stride` apart, shifted by kh - 1 - padding rows (kw - 1 - padding
        # columns), against the kernel flipped and transposed. Each slab of x's rows is
        # made whole in turn: nothing is added into a halo twice.
        wv = value(w)
        kh, kw = wv.shape[2:]
        dx = xp_of(g).empty(x_shape, dtype=g.dtype)
        flipped = lambda i, j: wv[:, :, kh - 1 - i, kw - 1 - j].T
        return _correlate(g, flipped, kh, kw, dx, 1, kh - 1 - padding, kw - 1 - padding, stride)

    return vjp


def _conv2d_vjp_w(out, x, w, stride=1, padding=0):
    w_shape = w.shape
    x = save(x, "conv2d: w's gradient, g correlated with x")

    def vjp(g):  # dw_ij = sum over batch and pixels of g (o, pixels) @ window_ij^T (pixels, c)
        _, _, kh, kw = w_shape
        wo = g.shape[3]
        wp = stride * (wo - 1) + kw
        dw = xp_of(g).zeros(w_shape, dtype=g.dtype)
        wide_input = x.shape[1] > w_shape[0]
        for rows in _row_slabs(g.shape[2], _wide_row_bytes(g.shape[0], x.shape[1], w_shape[0], wp, g.itemsize)):
            xs, count = _input_rows(x, rows, stride, kh, wp, padding, padding, xp=xp_of(g))
            g_wide = _widen(g[:, :, rows], stride, count, wp)
            windows = _all_windows(xs, kh, kw, count, wp)
            for image in range(g.shape[0]):  # every offset in one product on views, weight-sized
                if wide_input:  # (kh, kw, c, o): BLAS runs ~10 % faster with the wider operand first
                    dw += (windows[image] @ g_wide[image].T).transpose(3, 2, 0, 1)
                else:  # (kh, kw, o, c)
                    dw += (g_wide[image] @ windows[image].swapaxes(-1, -2)).transpose(2, 3, 0, 1)
        return dw

    return vjp


defvjp(conv2d, _conv2d_vjp_x, _conv2d_vjp_w)


@primitive()
def max_pool2d(x, size=2):
    # The maximum of the size*size strided views, one per window position: a 6-D
    # reduction over the (n, c, ho, size, wo, size) blocks is ~40x slower in NumPy.
    views = _window_positions(x, size)
    out = xp_of(x).maximum(views[0], views[1]) if len(views) > 1 else views[0].copy()
    for view in views[2:]:
        xp_of(x).maximum(out, view, out=out)
    return out


@primitive(remakeable=True)
def upsample2d(x, scale=2):
    n, c, h, w = _nchw(x, scale)
    out = xp_of(x).empty((n, c, h * scale, w * scale), dtype=x.dtype)
    for a in range(scale):  # x copied into each of the scale*scale strided views
        for b in range(scale):
            out[:, :, a::scale, b::scale] = x
    return out


def _nchw(x, size):
    if x.ndim != 4:
        raise ValueError(f"expected a 4-D NCHW input, got shape {x.shape}")
    if not (isinstance(size, int) and size >= 1):
        raise ValueError(f"size must be an int >= 1, got {size!r}")
    return x.shape


def _window_positions(x, size):
    """The size*size strided views of x, one per position in a window, row-major: view
    (a, b) holds each window's pixel (a, b). A ragged edge is dropped, as torch does."""
    n, c, h, w = _nchw(x, size)
    ho, wo = h // size, w // size
    if ho == 0 or wo == 0:
        raise ValueError(f"a {size}x{size} window does not fit in {h}x{w} pixels")
    return [x[:, :, a : ho * size : size, b : wo * size : size] for a in range(size) for b in range(size)]


def _max_pool2d_vjp(out, x, size=2):
    x_saved = save(x, "max_pool2d: each window's first maximum (x == out)")
    out_saved = save(out, "max_pool2d: each window's first maximum (x == out)")

    def vjp(g):
        x, out = value(x_saved), value(out_saved)
        # Each window's gradient goes to its first maximum in row-major order (as
        # torch's argmax): walk the size*size positions of the windows in that order,
        # each a strided view of x and dx, and hand g to the windows whose maximum sits
        # there and has not been handed out yet. Transients: window-sized masks only.
        xp, (n, c, ho, wo) = xp_of(g), g.shape
        dx = xp.zeros(x.shape, dtype=g.dtype)  # a ragged edge dropped by the forward gets 0
        given = xp.zeros(out.shape, dtype=bool)
        for a in range(size):
            for b in range(size):
                at = (slice(None), slice(None), slice(a, ho * size, size), slice(b, wo * size, size))
                here = x[at] == out
                here &= ~given
                xp.multiply(g, here, out=dx[at])
                given |= here
        return dx

    return vjp


def _upsample2d_vjp(out, x, scale=2):
    def vjp(g):  # each pixel's copies summed: scale*scale strided views added
        views = [g[:, :, a::scale, b::scale] for a in range(scale) for b in range(scale)]
        total = views[0].copy()
        for view in views[1:]:
            total += view
        return total

    return vjp


defvjp(max_pool2d, _max_pool2d_vjp)
defvjp(upsample2d, _upsample2d_vjp)


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


# ---- operators on traced values (readability in examples and tests) ----------------------

Var.__add__ = lambda self, other: add(self, other)
Var.__radd__ = lambda self, other: add(other, self)
Var.__sub__ = lambda self, other: sub(self, other)
Var.__rsub__ = lambda self, other: sub(other, self)
Var.__mul__ = lambda self, other: mul(self, other)
Var.__rmul__ = lambda self, other: mul(other, self)
Var.__truediv__ = lambda self, other: div(self, other)
Var.__rtruediv__ = lambda self, other: div(other, self)
Var.__matmul__ = lambda self, other: matmul(self, other)
Var.__rmatmul__ = lambda self, other: matmul(other, self)
Var.__neg__ = lambda self: neg(self)
Var.__getitem__ = lambda self, key: getitem(self, key)

# Comparisons are not differentiable: they give plain boolean arrays (for where).
_raw = lambda v: v.value if type(v) is Var else v
Var.__lt__ = lambda self, other: self.value < _raw(other)
Var.__le__ = lambda self, other: self.value <= _raw(other)
Var.__gt__ = lambda self, other: self.value > _raw(other)
Var.__ge__ = lambda self, other: self.value >= _raw(other)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    # NumPy calls this for `ndarray + Var` and for np.exp(Var): the arithmetic maps to
    # the traced ops; anything else would silently drop the gradient, so it refuses.
    op = _UFUNC_OPS.get(ufunc.__name__)
    if op is not None and method == "__call__" and not kwargs:
        return op(*inputs)
    raise TypeError(
        f"numpy.{ufunc.__name__} got a traced value: use harness.engine.ops instead of "
        "NumPy functions inside a differentiated function"
    )


_UFUNC_OPS = {"add": add, "subtract": sub, "multiply": mul, "divide": div, "true_divide": div,
              "matmul": matmul, "negative": neg}  # fmt: skip
Var.__array_ufunc__ = _array_ufunc
