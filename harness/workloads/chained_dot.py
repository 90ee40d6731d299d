"""Chained dot: ``sum(x @ (x @ ... (x @ z)))`` with L products, gradient wrt x.

From HIPS autograd #219 ("backprop eats all my RAM"): every product's input must be
kept for x's gradient, and x fans out to all L products, so its gradient receives L
contributions that a careless engine keeps alive together.

Segments: the L products are one ``chain`` (step i: ``z <- x @ z``, consts {"x"}), so
a remat strategy may keep only some of the z_i and recompute the others.
"""

import math

from harness.workloads import itemsize

SOURCE = "HIPS autograd #219"
STRESSES = "L stored intermediates; fan-out of x into L gradient contributions"
SEGMENTS = "the L products as one chain (consts: x)"
SIZES = {
    "tiny": {"D": 32, "L": 5, "cols": 32},
    "small": {"D": 500, "L": 50, "cols": 500},
    "paper": {"D": 1000, "L": 100, "cols": 1000},
}
# z's columns are the samples: each is pushed through the L products on its own. The
# sizes keep z square (cols = D), as in #219; `harness scale` varies cols.
BATCH_AXIS = "cols"


def init(rng, cfg, dtype):
    D = cfg["D"]
    # x ~ N(0, 1/D) keeps every z_i O(1): no overflow, no denormals (which slow
    # products by orders of magnitude and would swamp the timings).
    x = (rng.standard_normal((D, D)) / math.sqrt(D)).astype(dtype)
    z = rng.standard_normal((D, cfg["cols"])).astype(dtype)
    return {"x": x}, {"z": z}


def loss(ops, params, inputs, cfg):
    def product(i, z, consts):  # z_{i+1} = x @ z_i
        return ops.matmul(consts["x"], z)

    z = ops.chain(product, inputs["z"], cfg["L"], {"x": params["x"]})
    return ops.sum(z)


def bound_bytes(cfg, dtype):
    # z_{i+1} = x @ z_i needs z_i for x's gradient, so z_1 .. z_{L-1} must be kept until
    # the backward pass reaches them: L - 1 (D, cols) arrays saved at the end of the
    # forward pass (x and z_0 are inputs, in the baseline). z_L is saved by no VJP (sum's
    # needs only its shape), so it is not in the bound, which is exactly the saved
    # activations of a store-everything reverse pass; a step's peak is at least one array
    # more (z_L is live when it is made), so peak / bound >= L / (L - 1). Per column of
    # z: L - 1 D-vectors.
    return (cfg["L"] - 1) * cfg["D"] * cfg["cols"] * itemsize(dtype)
