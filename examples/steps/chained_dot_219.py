"""HIPS autograd #219 ("Decreasing autograd memory usage", May 2017), as its author wrote it.

alexbw's function: z <- np.dot(x, z) a hundred times, the sum, and autograd's grad of
it with respect to x; his data: x = randn(D, D) times its transpose, z = randn(D, D),
D = 1000, float64 (NumPy's default), seed 0. One step is one call of the gradient
function, the gradient handed back (his measured `m()` returned it): no optimizer, as
in the thread. The loop length and D are the config's, so that `small` is the op-set
workload chained_dot's small (D 500, L 50, cols 500) and `paper` the thread's.

The op-set workload it became, harness/workloads/chained_dot.py, scales x by
1/sqrt(D) so every z_i stays O(1); here x is the thread's x x^T, whose z_i grow by about
2D a product (finite in float64 at small; at paper they overflow to inf after about 90
products, as the thread's did). docs/seeds.md sets the two side by side.
"""

import autograd.numpy as np
from autograd import grad

FRAMEWORK = "autograd"
SOURCE = "HIPS/autograd#219 (alexbw, 3 May 2017): the chained dot and its grad, as posted"
SIZES = {
    "tiny": {"D": 32, "L": 5, "cols": 32},
    "small": {"D": 500, "L": 50, "cols": 500},
    "paper": {"D": 1000, "L": 100, "cols": 1000},
}
BATCH_AXIS = "cols"  # z's columns, each pushed through the L products on its own


def F(x, z, L):
    for i in range(L):
        z = np.dot(x, z)
    return np.sum(z)


dF = grad(F)  # with respect to x


def setup(cfg):
    import numpy

    numpy.random.seed(0)
    D = cfg["D"]
    x = numpy.random.randn(D, D)
    x = numpy.dot(x, x.T)
    z = numpy.random.randn(D, cfg["cols"])
    return {"x": x.astype(cfg["dtype"]), "z": z.astype(cfg["dtype"]), "L": cfg["L"]}


def step(state):
    return dF(state["x"], state["z"], state["L"])


def bound_bytes(cfg):
    # z_1 .. z_{L-1} are read by x's gradient (each product's input): L - 1 (D, cols)
    # arrays kept until the backward reaches them; x and z_0 are the state's. The same
    # bound as the op-set workload's (harness/workloads/chained_dot.py).
    return (cfg["L"] - 1) * cfg["D"] * cfg["cols"] * (4 if cfg["dtype"] == "float32" else 8)
