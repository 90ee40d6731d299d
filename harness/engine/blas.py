"""C += A @ B in one call: the gemm of the BLAS that NumPy bundles, with beta = 1.

NumPy's matmul always writes its product somewhere of its own (a fresh array, or
`out=` overwritten), so adding a contribution into a weight's gradient takes the
product as a transient and a second pass to add it in: prims/linalg.py's add_matmul makes it a
slab at a time to keep that transient small, and a (512, 16) @ (16, 512) weight
gradient then costs ~2x one BLAS call. ``gemm`` with beta = 1 adds the product
straight into the gradient: no transient, one pass over the output, one call.

NumPy's wheels bundle OpenBLAS with prefixed symbols (``scipy_cblas_sgemm64_`` with
64-bit integers in NumPy 2, ``cblas_sgemm64_`` in NumPy 1.2x); the library is the
instance NumPy loaded, so it runs with the thread count the adapter set for NumPy
(frameworks/autograd.py, fix_numpy_blas_threads). Where no such library is found (a
NumPy linked elsewhere), or for arrays it does not take (CuPy, float16, a batch of
matrices, a layout gemm cannot describe), `add_product` says so and the caller adds
the product the NumPy way.
"""

import ctypes
import glob
import os

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS's enum values

# (symbol prefix, suffix, integer type) of the CBLAS builds NumPy has bundled
_BUILDS = (("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64), ("cblas_", "", ctypes.c_int))

_gemm = None  # dtype -> the gemm function for it; {} where none was found


def _load():
    """{float32: sgemm, float64: dgemm} of NumPy's bundled CBLAS, or {}."""
    libs = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "lib*openblas*.so*")))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, integer in _BUILDS:
            found = {}
            for dtype, letter, scalar in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
                gemm = getattr(lib, f"{prefix}{letter}gemm{suffix}", None)
                if gemm is None:
                    break
                enum, ptr = ctypes.c_int, ctypes.c_void_p
                gemm.argtypes = [enum, enum, enum, integer, integer, integer, scalar, ptr, integer, ptr, integer,
                                 scalar, ptr, integer]  # fmt: skip
                gemm.restype = None
                found[np.dtype(dtype)] = gemm
            if len(found) == 2:
                return found
    return {}


def available():
    """Is a gemm found (so that add_product does the work for NumPy arrays)?"""
    global _gemm
    if _gemm is None:
        _gemm = _load()
    return bool(_gemm)


def _layout(a):
    """(transpose flag, leading dimension) of a 2-D array for a row-major gemm, or None
    where neither of its axes is contiguous."""
    item = a.itemsize
    rows, cols = a.strides
    if cols == item and rows % item == 0 and rows // item >= max(1, a.shape[1]):
        return _NO_TRANS, rows // item
    if rows == item and cols % item == 0 and cols // item >= max(1, a.shape[0]):
        return _TRANS, cols // item
    return None


def add_product(c, a, b):
    """``c += a @ b`` with one gemm, for 2-D NumPy arrays of one float dtype. Returns
    False, having done nothing, where it cannot (the caller adds the product itself)."""
    if not (type(c) is type(a) is type(b) is np.ndarray and c.ndim == a.ndim == b.ndim == 2):
        return False
    if _gemm is None and not available() or not _gemm:
        return False
    gemm = _gemm.get(c.dtype)
    if gemm is None or a.dtype != c.dtype or b.dtype != c.dtype or not c.flags.writeable:
        return False
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or c.shape != (m, n):
        raise ValueError(f"add_product: {c.shape} += {a.shape} @ {b.shape}")
    lc = _layout(c)
    if lc is None or np.may_share_memory(c, a) or np.may_share_memory(c, b):
        return False
    if lc[0] == _TRANS:  # a column-major c: c^T += b^T a^T, all row-major again
        c, a, b = c.T, b.T, a.T
        m, n = n, m
    if m == 0 or n == 0 or k == 0:
        return True  # nothing to add
    la, lb = _layout(a), _layout(b)
    if la is None or lb is None:
        return False
    ldc = c.strides[0] // c.itemsize
    gemm(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, a.ctypes.data, la[1], b.ctypes.data, lb[1], 1.0, c.ctypes.data, ldc)
    return True
