"""Bad input gets an error that names the op and the shapes or dtypes involved."""

import numpy as np
import pytest

from harness.engine import ops, value_and_grad, vjp

f32 = lambda *shape: np.ones(shape, dtype=np.float32)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ops.add(f32(3, 2), f32(4)), r"add: .*broadcast.*float32\(3, 2\), float32\(4,\)"),
        (lambda: ops.mul(f32(2, 3), f32(3, 2)), r"mul: .*float32\(2, 3\), float32\(3, 2\)"),
        (lambda: ops.matmul(f32(3, 4), f32(5, 6)), r"matmul: inner dimensions differ: \(3, 4\) @ \(5, 6\)"),
        (lambda: ops.matmul(f32(4), f32(4, 2)), r"matmul: operands must be at least 2-D"),
        (lambda: ops.reshape(f32(2, 3), (4, 2)), r"reshape: .*float32\(2, 3\)"),
        (lambda: ops.permute_dims(f32(2, 3), (0, 2)), r"permute_dims: .*float32\(2, 3\)"),
        (lambda: ops.concat([f32(2, 3), f32(2, 4)]), r"concat: .*float32\(2, 3\), float32\(2, 4\)"),
        (lambda: ops.sum(f32(2, 3), axis=2), r"sum: .*float32\(2, 3\)"),
        (lambda: ops.conv2d(f32(1, 3, 5, 5), f32(4, 2, 3, 3)), r"conv2d: input \(1, 3, 5, 5\) has 3 channels but weight \(4, 2, 3, 3\) expects 2"),
        (lambda: ops.conv2d(f32(3, 5, 5), f32(4, 3, 3, 3)), r"conv2d: expected a 4-D NCHW input"),
        (lambda: ops.max_pool2d(f32(1, 1, 1, 4), 2), r"max_pool2d: a 2x2 window does not fit in 1x4"),
        (lambda: ops.take(f32(3, 2), np.array([5])), r"take: .*float32\(3, 2\)"),
        (lambda: ops.getitem(f32(3, 2), 7), r"getitem: .*float32\(3, 2\)"),
    ],
)
def test_mismatched_shapes_name_the_op_and_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ops.exp(np.arange(3)), r"exp: unsupported dtype int64 for operand 0 of shape \(3,\)"),
        (lambda: ops.add(np.ones(3, np.complex64), 1.0), r"add: unsupported dtype complex64"),
        (lambda: ops.matmul(np.ones((2, 2), bool), f32(2, 2)), r"matmul: unsupported dtype bool"),
        (lambda: ops.reshape(np.ones(4, np.complex128), (2, 2)), r"reshape: unsupported dtype complex128"),
        (lambda: ops.add(f32(3), np.ones(3)), r"add: operands have different dtypes \(float32\(3,\), float64\(3,\)\)"),
        (lambda: ops.add(f32(3), [1.0, 2.0, 3.0]), r"add: operand 1 is a list"),
        (lambda: ops.take(f32(3), np.array([0.0])), r"take: indices must be an integer array, got float64"),
        (lambda: ops.where(f32(3), f32(3), f32(3)), r"where: cond must be a boolean array, got float32"),
        (lambda: ops.getitem(f32(3), np.array([0, 1])), r"getitem: only basic indexing.*use take\(\)"),
        (lambda: ops.cumsum(f32(3), None), r"cumsum: axis must be an int"),
    ],
)
def test_unsupported_dtypes_name_the_op_and_dtype(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_a_traced_op_reports_the_same_errors():
    with pytest.raises(ValueError, match=r"matmul: inner dimensions differ"):
        value_and_grad(lambda x: ops.sum(ops.matmul(x, x)))(f32(2, 3))
    with pytest.raises(TypeError, match=r"exp: unsupported dtype int64"):
        value_and_grad(lambda x, i: ops.sum(ops.mul(x, ops.exp(i))))(f32(3), np.arange(3))


def test_gradient_of_a_non_scalar_says_so():
    with pytest.raises(ValueError, match=r"value_and_grad: f must return a scalar.*shape \(3,\)"):
        value_and_grad(ops.tanh)(f32(3))
    _, backward = vjp(ops.tanh, f32(3))
    with pytest.raises(ValueError, match=r"backward: the function returned an array of shape \(3,\).*backward\(seed\)"):
        backward()


def test_differentiating_integers_or_non_arrays_says_so():
    with pytest.raises(TypeError, match=r"argument 0 has dtype int64; only floating arrays"):
        value_and_grad(ops.sum)(np.arange(3))
    with pytest.raises(TypeError, match=r"argument 0\['step'\] has dtype int64"):
        value_and_grad(lambda p: ops.sum(p["w"]))({"w": f32(2), "step": np.array(3)})
    with pytest.raises(TypeError, match=r"argument 0 is a float"):
        value_and_grad(ops.exp)(1.0)


def test_bad_order_names_the_valid_choices():
    with pytest.raises(ValueError, match=r"unknown backward order 'lifo'; valid orders: heap, bfs, dfs"):
        value_and_grad(ops.sum, order="lifo")
    with pytest.raises(ValueError, match=r"valid orders: heap, bfs, dfs"):
        vjp(ops.sum, f32(2), order="BFS")


def test_bad_argnums_and_second_backward():
    with pytest.raises(ValueError, match=r"argnums \(2,\) out of range for 2 arguments"):
        value_and_grad(ops.add, argnums=(2,))(f32(2), f32(2))
    with pytest.raises(ValueError, match=r"distinct"):
        value_and_grad(ops.add, argnums=(0, 0))(f32(2), f32(2))
    _, backward = vjp(ops.sum, f32(2))
    backward()
    with pytest.raises(RuntimeError, match=r"backward\(\) runs once"):
        backward()


def test_numpy_functions_refuse_traced_values():
    with pytest.raises(TypeError, match=r"use harness.engine.ops instead of NumPy functions"):
        value_and_grad(lambda x: ops.sum(np.exp(x)))(f32(3))
    with pytest.raises(TypeError, match=r"use harness.engine.ops instead of NumPy functions"):
        value_and_grad(lambda x: ops.sum(np.asarray(x)))(f32(3))


def test_arithmetic_with_plain_arrays_stays_traced():
    c = np.full(3, 2.0, dtype=np.float32)
    _, g = value_and_grad(lambda x: ops.sum(c * x + c - x / c))(f32(3))
    np.testing.assert_allclose(g, 2.0 - 0.5)
