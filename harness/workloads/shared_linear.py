"""One Linear layer applied to K inputs: ``h_k = tanh(x_k @ W^T + b)``, W^T per use.

From PyTorch PR #4746 ("Heuristic-based autograd execution order"): a real model used
one ``Linear`` many times; once ``Linear`` was decomposed into ``Transpose`` + ``Addmm``,
breadth-first backward scheduled every ``TBackward`` last, so the K (D, D) gradients
of W^T waited together ("huge amount of memory occupied by intermediate results")
instead of being accumulated one by one; the fix was the creation-order max-heap that
PyTorch still uses. So the transpose is taken *inside* the loop, at every use, as
``F.linear`` does: that per-use transpose node is what an execution order can delay.
The K uses feed the loss side by side (``sum(stack(...))``, like a projection applied
at every step of a sequence), so breadth-first order reaches all K matmuls before any
transpose; in a chain of uses it would not, and the workload would show nothing.
W is stored (out, in) like ``torch.nn.Linear.weight``.

The PR gives no model sizes; ``paper`` is chosen so the effect is unmistakable: K = 64
pending (1024, 1024) float32 gradients are 256 MiB against 8 MiB of activations.
"""

import math

from harness.workloads import itemsize

SOURCE = "PyTorch PR #4746 (heuristic-based autograd execution order)"
STRESSES = "one Linear applied to K inputs, W^T taken per use: backward execution order"
SEGMENTS = ""  # no checkpoint or chain: remat strategies do not apply
SIZES = {
    "tiny": {"B": 3, "D": 16, "K": 5},
    "small": {"B": 16, "D": 512, "K": 32},
    "paper": {"B": 32, "D": 1024, "K": 64},  # the PR gives no sizes: see the docstring
}
BATCH_AXIS = "B"  # the rows of every x_k


def init(rng, cfg, dtype):
    B, D = cfg["B"], cfg["D"]
    params = {
        # spectral radius ~0.9: activations neither explode nor vanish over K uses
        "W": 0.9 / math.sqrt(D) * rng.standard_normal((D, D)),
        "b": 0.1 * rng.standard_normal(D),
    }
    inputs = {"x": rng.standard_normal((cfg["K"], B, D))}
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return cast(params), cast(inputs)


def loss(ops, params, inputs, cfg):
    W, b = params["W"], params["b"]
    per_use = []
    for k in range(cfg["K"]):
        x_k = ops.getitem(inputs["x"], k)
        h = ops.tanh(ops.add(ops.matmul(x_k, ops.permute_dims(W, (1, 0))), b))
        per_use.append(ops.mean(ops.mul(h, h)))
    return ops.sum(ops.stack(per_use))


def bound_bytes(cfg, dtype):
    # Use k computes h_k = tanh(x_k @ W^T + b): W's gradient needs x_k (an input, in
    # the baseline), tanh's VJP and the square need h_k (or its pre-activation), so
    # h_1 .. h_K are live together at the end of the forward pass: K (B, D) arrays.
    # The transposes are views or (D, D) temporaries needed by no VJP. The K pending
    # (D, D) gradients of a bad execution order are *not* in the bound: they are what
    # it exposes. Per row: K D-vectors.
    return cfg["K"] * cfg["B"] * cfg["D"] * itemsize(dtype)
