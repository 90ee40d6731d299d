"""The op set of harness/ops.py on the reference engine, with the contract's exact
names and signatures. Each op computes on NumPy (or CuPy) arrays; when an operand is
traced (inside `value_and_grad`/`vjp`) it also records a node. Definitions and VJPs
are in prims/, one module per family."""

from harness.engine.prims import (  # noqa: F401
    add, concat, conv2d, cos, cumsum, div, exp, getitem, log, logsumexp, matmul, max,
    max_pool2d, mean, mul, neg, permute_dims, relu, reshape, sigmoid, sin, softmax, sqrt,
    stack, sub, sum, take, tanh, upsample2d, where,
)  # fmt: skip
from harness.engine.remat import chain, checkpoint  # noqa: F401

__all__ = [
    "add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu",
    "sin", "cos", "matmul", "sum", "mean", "max", "reshape", "permute_dims", "concat",
    "stack", "getitem", "take", "where", "softmax", "logsumexp", "conv2d", "max_pool2d",
    "upsample2d", "cumsum", "checkpoint", "chain",
]  # fmt: skip
