"""Elementwise primitives, each forward with its VJP below it.

Binary ops broadcast as NumPy does, and either operand may be a Python scalar; their
VJPs sum a broadcast cotangent back down (`unbroadcast_f`). `writes_into` is the same
forward writing into a given buffer, for the ops that save none of their operands
(tape.donated). Each derivative that is an elementwise chain is one `Fused`: one kernel
on CuPy, on the CPU the NumPy function beside it, which makes at most one array.
"""

import numpy as np

from harness.engine.prims.common import negated, reuses_g, slabs, times, unbroadcast, unbroadcast_f, writable
from harness.engine.saving import save, value
from harness.engine.tape import defvjp, primitive
from harness.engine.xp import Fused
from harness.engine.xp import array_module as xp_of


# ---- add, sub: linear, they save nothing ----------------------------------------------


@primitive(n_arrays=2, remakeable=True, writes_into=lambda x, y, out: xp_of(x, y).add(x, y, out=out))
def add(x, y):
    return xp_of(x, y).add(x, y)


defvjp(add, lambda out, x, y: unbroadcast_f(x, lambda g: g),
            lambda out, x, y: unbroadcast_f(y, lambda g: g))  # fmt: skip


@primitive(n_arrays=2, remakeable=True, writes_into=lambda x, y, out: xp_of(x, y).subtract(x, y, out=out))
def sub(x, y):
    return xp_of(x, y).subtract(x, y)


def _sub_vjp_y(out, x, y):
    shape = y.shape

    def vjp(g, into=None):
        if g.shape == shape:
            return negated(g, into)
        return -unbroadcast(g, shape)  # summed first: -g is never made whole

    return reuses_g(vjp)


defvjp(sub, lambda out, x, y: unbroadcast_f(x, lambda g: g),
            _sub_vjp_y)  # fmt: skip


# ---- mul, div: each operand's gradient saves the other ------------------------------------


@primitive(n_arrays=2, remakeable=True)
def mul(x, y):
    return xp_of(x, y).multiply(x, y)


defvjp(mul, lambda out, x, y: unbroadcast_f(x, times(save(y, "mul: x's gradient g y"))),
            lambda out, x, y: unbroadcast_f(y, times(save(x, "mul: y's gradient g x"))))  # fmt: skip


@primitive(n_arrays=2)
def div(x, y):
    return xp_of(x, y).true_divide(x, y)


def _div_vjp_x(out, x, y):
    y = save(y, "div: x's gradient g / y")
    return unbroadcast_f(x, reuses_g(lambda g, into=None: xp_of(g).true_divide(g, value(y), out=into)))


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


defvjp(div, _div_vjp_x, _div_vjp_y)


# ---- neg -----------------------------------------------------------------------------------


@primitive(remakeable=True, writes_into=lambda x, out: xp_of(x).negative(x, out=out))
def neg(x):
    return xp_of(x).negative(x)


defvjp(neg, lambda out, x: negated)


# ---- exp, sqrt, tanh, sigmoid, relu: the derivative reads the output alone ---------------------


@primitive(writes_into=lambda x, out: xp_of(x).exp(x, out=out))
def exp(x):
    return xp_of(x).exp(x)


defvjp(exp, lambda out, x: times(save(out, "exp: g out")))


@primitive(writes_into=lambda x, out: xp_of(x).sqrt(x, out=out))
def sqrt(x):
    return xp_of(x).sqrt(x)


def _sqrt_grad_numpy(g, o, out=None):  # g * 0.5 / out
    t = np.multiply(g, 0.5, out=out)
    t /= o
    return t


_sqrt_grad = Fused("sqrt_grad", ("g", "o"), "g * 0.5 / o", _sqrt_grad_numpy)


def _sqrt_vjp(out, x):
    out = save(out, "sqrt: g / (2 out)")
    return reuses_g(lambda g, into=None: _sqrt_grad(g, value(out), out=into))


defvjp(sqrt, _sqrt_vjp)


@primitive(writes_into=lambda x, out: xp_of(x).tanh(x, out=out))
def tanh(x):
    return xp_of(x).tanh(x)


def _tanh_grad_numpy(g, o, out=None):  # g * (1 - out**2), in one buffer
    t = writable(o * o)
    np.subtract(1, t, out=t)
    t *= g
    return t


_tanh_grad = Fused("tanh_grad", ("g", "o"), "g * (1 - o * o)", _tanh_grad_numpy)


def _tanh_vjp(out, x):
    out = save(out, "tanh: g (1 - out^2)")
    return lambda g: _tanh_grad(g, value(out))


defvjp(tanh, _tanh_vjp)


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


def _sigmoid_grad_numpy(g, o, out=None):  # g * out * (1 - out), in one buffer
    t = writable(1 - o)
    t *= o
    t *= g
    return t


_sigmoid_grad = Fused("sigmoid_grad", ("g", "o"), "g * o * (1 - o)", _sigmoid_grad_numpy)


def _sigmoid_vjp(out, x):
    out = save(out, "sigmoid: g out (1 - out)")
    return lambda g: _sigmoid_grad(g, value(out))


defvjp(sigmoid, _sigmoid_vjp)


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


def _relu_grad_numpy(g, o, out=None):
    # The mask is made a slab at a time (a 1-byte-per-element transient for the whole
    # array otherwise).
    out = np.empty(g.shape, dtype=g.dtype) if out is None else out
    for b in slabs(g.shape, itemsize=1):
        np.multiply(g[b], o[b] > 0, out=out[b])
    return out


_relu_grad = Fused("relu_grad", ("g", "o"), "g * (o > 0)", _relu_grad_numpy)  # 0 at the kink, as torch


def _relu_vjp(out, x):
    # relu saves its output, not a mask: the output is saved anyway, as the next
    # matmul's or conv's input (one buffer for both).
    out = save(out, "relu: g (out > 0)")
    return reuses_g(lambda g, into=None: _relu_grad(g, value(out), out=into))


defvjp(relu, _relu_vjp)


# ---- log, sin, cos: the derivative reads the input ------------------------------------------


@primitive()
def log(x):
    return xp_of(x).log(x)


def _log_vjp(out, x):
    x = save(x, "log: g / x")
    return reuses_g(lambda g, into=None: xp_of(g).true_divide(g, value(x), out=into))


defvjp(log, _log_vjp)


# sin and cos are remakeable: one transcendental per element is cheap beside keeping
# an array (tiny_nerf's positional encoding is remade for the weight gradients it feeds)
@primitive(remakeable=True)
def sin(x):
    return xp_of(x).sin(x)


def _sin_grad_numpy(g, x, out=None):  # g * cos(x)
    t = writable(np.cos(x))
    t *= g
    return t


_sin_grad = Fused("sin_grad", ("g", "x"), "g * cos(x)", _sin_grad_numpy)


def _sin_vjp(out, x):
    x = save(x, "sin: g cos(x)")
    return lambda g: _sin_grad(g, value(x))


defvjp(sin, _sin_vjp)


@primitive(remakeable=True)
def cos(x):
    return xp_of(x).cos(x)


def _cos_grad_numpy(g, x, out=None):  # -g * sin(x)
    t = writable(np.sin(x))
    t *= g
    t *= -1
    return t


_cos_grad = Fused("cos_grad", ("g", "x"), "-g * sin(x)", _cos_grad_numpy)


def _cos_vjp(out, x):
    x = save(x, "cos: -g sin(x)")
    return lambda g: _cos_grad(g, value(x))


defvjp(cos, _cos_vjp)
