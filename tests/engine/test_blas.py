"""blas.add_product: C += A @ B in one gemm call, for every layout a VJP hands it, and
nothing where it cannot (the caller then adds the product the NumPy way)."""

import numpy as np
import pytest

from harness.engine import blas
from harness.engine.prims import linalg
from harness.engine.testing import tracemalloc_peak

rng = np.random.default_rng(0)

pytestmark = pytest.mark.skipif(not blas.available(), reason="this NumPy bundles no CBLAS gemm that blas.py knows")


def operand(shape, layout, dtype):
    """A 2-D array of `shape` laid out as a VJP may hand it: C order, a transpose of a
    C-order array, or a slice of a wider one (a leading dimension beyond the columns)."""
    rows, cols = shape
    if layout == "C":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "T":
        return rng.standard_normal((cols, rows)).astype(dtype).T
    return rng.standard_normal((rows, cols + 3)).astype(dtype)[:, 1 : cols + 1]  # "slice"


LAYOUTS = ["C", "T", "slice"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c_layout", LAYOUTS)
@pytest.mark.parametrize("a_layout", LAYOUTS)
@pytest.mark.parametrize("b_layout", LAYOUTS)
def test_adds_the_product_into_c_for_every_layout(dtype, c_layout, a_layout, b_layout):
    m, k, n = 5, 3, 4
    c, a, b = operand((m, n), c_layout, dtype), operand((m, k), a_layout, dtype), operand((k, n), b_layout, dtype)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    assert blas.add_product(c, a, b)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, expected, rtol=tol, atol=tol)
    assert c.dtype == dtype


@pytest.mark.parametrize(
    "why, make",
    [
        ("float16", lambda: [np.zeros((2, 2), np.float16)] * 3),
        ("mixed dtypes", lambda: [np.zeros((2, 2), np.float32), np.ones((2, 2)), np.ones((2, 2), np.float32)]),
        ("a batch of matrices", lambda: [np.zeros((2, 2, 2))] * 3),
        ("no contiguous axis", lambda: [np.zeros((2, 2)), np.ones((4, 4))[::2, ::2], np.ones((2, 2))]),
        ("read-only c", lambda: [np.broadcast_to(np.zeros(2), (2, 2)), np.ones((2, 2)), np.ones((2, 2))]),
    ],
)
def test_declines_what_gemm_cannot_take_and_leaves_c_alone(why, make):
    c, a, b = make()
    before = np.array(c, copy=True)
    assert not blas.add_product(c, a, b), why
    np.testing.assert_array_equal(c, before)


def test_declines_an_operand_that_overlaps_c():
    c = rng.standard_normal((4, 4))
    assert not blas.add_product(c, c[:, :2], np.ones((2, 4)))


def test_a_weight_gradient_is_added_with_no_transient():
    # A (512, 16) @ (16, 512) float32 contribution added into a shared weight's (512,
    # 512) gradient, as shared_linear's VJPs do: the product made whole would be 1 MiB,
    # made a slab at a time (the NumPy way) an eighth of that, 128 KiB. One gemm with
    # beta = 1 makes none: what tracemalloc sees is NumPy's view objects, a few hundred
    # bytes, so the bound is far below one slab.
    x, g = rng.standard_normal((16, 512)).astype(np.float32), rng.standard_normal((16, 512)).astype(np.float32)
    acc = rng.standard_normal((512, 512)).astype(np.float32)
    expected = acc.astype(np.float64) + x.T.astype(np.float64) @ g
    _, peak = tracemalloc_peak(linalg.add_matmul, acc, x.T, g)
    assert peak < 4096
    np.testing.assert_allclose(acc, expected, rtol=1e-4, atol=1e-4)
