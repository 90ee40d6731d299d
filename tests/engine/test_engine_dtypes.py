"""float32 in, float32 everywhere: outputs, gradients, and every buffer the engine
allocates on the way (the ledger records allocations by dtype). float16 too. Python
and NumPy scalar constants never upcast (NumPy 2, NEP 50)."""

import numpy as np
import pytest

from engine_cases import CASES, float_args, normal
from harness.engine import Ledger, ops, value_and_grad, vjp


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", CASES)
def test_every_primitive_keeps_the_dtype(name, dtype):
    fn, args = CASES[name]
    args = float_args(args, dtype)
    argnums = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    ledger = Ledger()
    out, backward = vjp(lambda *a: fn(ops, *a), *args, argnums=argnums, ledger=ledger)
    grads = backward(np.ones(out.shape, dtype=out.dtype))
    assert out.dtype == dtype
    assert [g.dtype for g in grads] == [dtype] * len(argnums)
    assert set(ledger.allocated) == {dtype}, ledger.allocated  # forward, cotangents, accumulators


@pytest.mark.parametrize("constant", [2, 2.5, np.float64(2.5), np.int64(2), np.float32(2.5)])
def test_scalar_constants_do_not_upcast(constant):
    x = normal(3).astype(np.float32)
    for op in (ops.add, ops.sub, ops.mul, ops.div):
        assert op(x, constant).dtype == np.float32
        assert op(constant, x).dtype == np.float32
        loss, g = value_and_grad(lambda x: ops.sum(op(constant, op(x, constant))))(x)
        assert loss.dtype == g.dtype == np.float32


def test_mean_and_max_gradients_stay_float32():
    # The two VJPs HIPS autograd 1.9.1 upcasts under NumPy 2 (it divides by an int64 count).
    x = normal(4, 5).astype(np.float32)
    for f in (lambda x: ops.mean(x, axis=0), lambda x: ops.max(x, axis=1), lambda x: ops.mean(x)):
        _, g = value_and_grad(lambda x: ops.sum(f(x)))(x)
        assert g.dtype == np.float32


def test_dict_params_keep_each_dtype_even_for_unused_ones():
    params = {"w": normal(3, 2).astype(np.float32), "v": normal(2).astype(np.float16)}
    _, g = value_and_grad(lambda p: ops.sum(p["w"]))(params)
    assert g["w"].dtype == np.float32 and g["v"].dtype == np.float16
    np.testing.assert_array_equal(g["v"], 0)
