"""The elementwise chains that are one kernel on CuPy (xp.Fused): the kernel's
expression, evaluated with NumPy, against the NumPy path the CPU runs.

No GPU is needed: the CUDA source is `expr` as it is written, so checking its arithmetic
here checks what cupy.ElementwiseKernel compiles (CuPy itself is not imported).
"""

import numpy as np
import pytest

from harness.engine import prims
from harness.engine.xp import Fused

FUSED = {name: f for family in prims.FAMILIES for name, f in vars(family).items() if isinstance(f, Fused)}
rng = np.random.default_rng(7)

# Operand shapes per chain: the ones that broadcast in the engine do so here too.
# The chains whose VJP may write over g (prims.common.reuses_g), and sigmoid's forward.
WRITES_INTO = {"relu_grad", "sqrt_grad", "div_grad_y", "sigmoid"}
SHAPES = {"div_grad_y": [(4, 5), (4, 5), (5,)]}


def test_every_vjp_chain_is_fused():
    names = {f.name for f in FUSED.values()}
    assert names >= {"tanh_grad", "sigmoid_grad", "relu_grad", "sqrt_grad", "div_grad_y", "sin_grad",
                     "cos_grad", "sigmoid"}  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_the_kernel_expression_computes_what_the_numpy_path_does(name, dtype):
    fused = FUSED[name]
    shapes = SHAPES.get(fused.name, [(4, 5)] * len(fused.names))
    # positive operands keep sqrt's and div's denominators away from 0; relu's output
    # is checked on both sides of its kink
    arrays = [rng.uniform(0.2, 2.0, s).astype(dtype) for s in shapes]
    if fused.name == "relu_grad":
        arrays[1] = np.maximum(rng.standard_normal(shapes[1]), 0).astype(dtype)
    expected = fused.reference(*arrays)
    got = fused(*arrays)
    assert got.dtype == dtype and got.shape == np.broadcast_shapes(*shapes)
    np.testing.assert_allclose(got, expected, rtol=1e-6 if dtype == np.float32 else 1e-13)
    if fused.name in WRITES_INTO:  # into a given buffer (the pass hands a VJP g's own)
        into = np.empty_like(got)
        assert fused(*arrays, out=into) is into
        np.testing.assert_array_equal(into, got)


def test_a_cupy_array_goes_to_the_kernel_not_numpy():
    # Without a GPU: a stand-in array type from a module named cupy, and a stand-in
    # kernel, show the dispatch (the NumPy path would raise on it).
    calls = []
    fused = Fused("probe", ("g",), "g * 2", numpy=lambda *a, out=None: calls.append("numpy"))
    fused._kernel = lambda *a: calls.append(("kernel", len(a))) or "done"
    fake = type("ndarray", (), {"__module__": "cupy._core.core"})()
    assert fused(fake) == "done" and fused(fake, out=fake) == "done"
    assert calls == [("kernel", 1), ("kernel", 2)]


def test_no_fused_kernel_names_an_input_as_its_output():
    # CuPy declares inputs and the output as parameters of one CUDA function: a shared
    # name does not compile (div's VJP once read an input "y" and wrote "y")
    from harness.engine import prims, xp

    kernels = [value for family in prims.FAMILIES for value in vars(family).values() if isinstance(value, xp.Fused)]
    assert kernels and all(xp.OUTPUT not in kernel.names for kernel in kernels)
