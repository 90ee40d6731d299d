"""conv2d, its two VJPs below it, and the correlation all three are made of.

The forward and both VJPs walk the output a slab of rows at a time (`_row_slabs`): a
padded input slab and a wide result slab are the transients, and each kernel offset
is one matrix product on a view of the flattened padded rows (`_correlate`; a
one-channel input copies its windows side by side instead). The input's gradient is
the same correlation as the forward's, of g against the flipped, transposed kernel;
the weight's makes all kh*kw offsets of a slab in one batched product (docs/engine.md,
"Transients").
"""

import itertools

from harness.engine.prims.common import slab_count
from harness.engine.saving import copy_rows, input_rows, save, value
from harness.engine.tape import defvjp, primitive
from harness.engine.xp import array_module as xp_of


@primitive(n_arrays=2)
def conv2d(x, w, stride=1, padding=0):
    # Cross-correlation as kh*kw matmuls on the flattened padded image (`_correlate`).
    n, c, ho, wo, kh, kw = _conv_geometry(x, w, stride, padding)
    out = xp_of(x, w).empty((n, w.shape[0], ho, wo), dtype=x.dtype)
    return _correlate(x, lambda i, j: w[:, :, i, j], kh, kw, out, stride, padding, padding)


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


# ---- the correlation: out = sum over kernel offsets of tap @ a window of the padded input ----


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
    return n * max(c_in, c_out) * wp * itemsize


def _row_slabs(ho, row_bytes):
    """The output rows in at most SLABS slices, each with at least MIN_SLAB_BYTES bytes
    of wide rows (`row_bytes` per row across the batch): a small conv makes fewer BLAS
    calls (9 per slab and pass) for transients that stay under a few slabs' bytes."""
    count = slab_count(ho * row_bytes)
    step = -(-ho // count)
    return [slice(y, min(y + step, ho)) for y in range(0, ho, step)]


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
    lo = max(-(-start // dilation), 0)
    hi = min(-(-(start + length) // dilation), size)
    return lo, max(lo, hi)


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
