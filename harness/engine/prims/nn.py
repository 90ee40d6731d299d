"""The neural-network ops but conv2d (conv.py): softmax and logsumexp over an axis,
max_pool2d and upsample2d over NCHW maps, each forward with its VJP below it."""

from harness.engine.prims.common import adds_into, kept_shape, normalize_axes, slabs, zero
from harness.engine.saving import save, value
from harness.engine.tape import defvjp, primitive
from harness.engine.xp import array_module as xp_of


@primitive()
def softmax(x, axis=-1):
    xp = xp_of(x)
    e = x - _finite_max(x, axis)
    xp.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _softmax_vjp(out, x, axis=-1):
    out = save(out, "softmax: out (g - <g, out>)")

    def vjp(g):
        o = value(out)
        return o * (g - (g * o).sum(axis=axis, keepdims=True))

    return vjp


defvjp(softmax, _softmax_vjp)


@primitive()
def logsumexp(x, axis=-1, keepdims=False):
    out = _logsumexp_kept(x, axis)
    return out if keepdims else out.reshape(_reduced_shape(x.shape, axis))


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


defvjp(logsumexp, _logsumexp_vjp)


# ---- the stable pieces both make ---------------------------------------------------------


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
    return xp.where(xp.isfinite(m), m, zero(m))


# ---- NCHW maps: pooling and upsampling -----------------------------------------------------


@primitive()
def max_pool2d(x, size=2):
    # The maximum of the size*size strided views, one per window position: a 6-D
    # reduction over the (n, c, ho, size, wo, size) blocks is ~40x slower in NumPy.
    views = _window_positions(x, size)
    out = xp_of(x).maximum(views[0], views[1]) if len(views) > 1 else views[0].copy()
    for view in views[2:]:
        xp_of(x).maximum(out, view, out=out)
    return out


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


defvjp(max_pool2d, _max_pool2d_vjp)


@primitive(remakeable=True)
def upsample2d(x, scale=2):
    n, c, h, w = _nchw(x, scale)
    out = xp_of(x).empty((n, c, h * scale, w * scale), dtype=x.dtype)
    for a in range(scale):  # x copied into each of the scale*scale strided views
        for b in range(scale):
            out[:, :, a::scale, b::scale] = x
    return out


def _upsample2d_vjp(out, x, scale=2):
    def vjp(g):  # each pixel's copies summed: scale*scale strided views added
        views = [g[:, :, a::scale, b::scale] for a in range(scale) for b in range(scale)]
        total = views[0].copy()
        for view in views[1:]:
            total += view
        return total

    return vjp


defvjp(upsample2d, _upsample2d_vjp)


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
