"""Start the framework's runtime before the baseline, with a gradient unrelated to the cell.

The first gradient a process computes pays one-time start-up costs that belong to the
framework, not to the workload: XLA initialises its LLVM-based CPU compiler (about
40 MiB of RSS kept for the life of the process, measured for JAX eager on
chained_dot: the steady-state peak above baseline fell from 165 to 125 MiB when a
3x3 product ran before the baseline), Inductor its C++ toolchain, PyTensor its
compile cache, torch.utils.checkpoint its lazy imports (about 65 MiB, seen as a
remat=native cell at tiny size costing 75 MiB against 12 MiB without). Imports are
left out of every figure by the baseline; this start-up is of the same kind, so the
worker computes one tiny gradient (two 4x4 tanh layers through the op set's `chain`
and `checkpoint`, so the cell's remat strategy starts too; in the cell's dtype, mode
and device) before it takes the baseline. What the *workload* makes a framework keep
(its own compiled executables, cached buffers) still counts.
"""

import numpy as np


def _tiny_loss(ops, params, inputs):
    def layer(i, x, consts):  # pure in its arguments, as the remat contract asks
        return ops.tanh(ops.matmul(x, consts["w"]))

    x = ops.chain(layer, inputs["x"], 2, {"w": params["w"]})
    return ops.sum(ops.checkpoint(lambda x, w: layer(2, x, {"w": w}), x, params["w"]))


#: the warm-up's loss, public: a standalone script (harness/upstream) warms the runtime with it too
tiny_loss = _tiny_loss


def warm_runtime(adapter, device, mode, dtype):
    """One value-and-gradient of a 4x4 layer through `adapter`, synchronised."""
    rng = np.random.default_rng(0)
    params = adapter.from_numpy({"w": rng.standard_normal((4, 4)).astype(dtype)}, device)
    inputs = adapter.from_numpy({"x": rng.standard_normal((4, 4)).astype(dtype)}, device)
    if hasattr(adapter, "prepare"):  # plans (articulation) are made per loss, as for the cell
        adapter.prepare(_tiny_loss, params, inputs, name="the runtime warm-up's 4x4 layers")
    _, grads = adapter.value_and_grad(_tiny_loss, mode)(params, inputs)
    adapter.sync(grads)


DESCRIPTION = "one gradient of 4x4 tanh layers via chain and checkpoint (cell's dtype, mode, device, remat) before the baseline"
