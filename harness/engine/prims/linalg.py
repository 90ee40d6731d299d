"""matmul, its VJP below it, and the products that VJP (and a shared weight's later
gradient contributions) make: `product`, `product_cotangent`, `add_matmul`."""

import numpy as np

from harness.engine.blas import add_product
from harness.engine.prims.common import adds_into, slab_count, unbroadcast
from harness.engine.saving import Rebuilt, save, value
from harness.engine.tape import defvjp, primitive
from harness.engine.xp import array_module as xp_of


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


defvjp(matmul, _matmul_vjp_a, _matmul_vjp_b)


# ---- the products matmul's VJP makes ---------------------------------------------------------


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
    count = slab_count(acc.nbytes)
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
