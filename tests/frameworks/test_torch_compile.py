"""torch "compiled" really compiles: each loss gets its own Dynamo cache entry, and a
silent fallback to eager is an error.

Found by `python -m harness check`: with one shared closure compiled for every
workload, Dynamo recompiled per workload and dtype and, past its recompile limit (8),
ran the later workloads eagerly while they were reported as "compiled".
One tiny function is compiled here (~2-4 s on this machine with a warm Inductor cache).
"""

import numpy as np
import pytest

from harness import frameworks

torch = pytest.importorskip("torch")


def tanh_loss(ops, params, inputs):
    return ops.sum(ops.mul(ops.tanh(params["x"]), inputs["c"]))


def test_compiled_step_runs_a_compiled_graph_once_per_shape():
    from torch._dynamo.utils import counters

    adapter = frameworks.get("torch").load("cpu", "compiled")
    assert torch._dynamo.config.fail_on_recompile_limit_hit
    rng = np.random.default_rng(0)
    params = adapter.from_numpy({"x": rng.standard_normal((3, 4))})
    inputs = adapter.from_numpy({"c": rng.standard_normal((3, 4))})
    step = adapter.value_and_grad(tanh_loss, "compiled")

    graphs = counters["stats"]["unique_graphs"]
    loss, grads = step(params, inputs)
    assert counters["stats"]["unique_graphs"] == graphs + 1  # Dynamo captured it
    step(params, inputs)
    assert counters["stats"]["unique_graphs"] == graphs + 1  # and reuses it

    x, c = (adapter.to_numpy(t) for t in (params["x"], inputs["c"]))
    np.testing.assert_allclose(adapter.to_numpy(loss), np.sum(np.tanh(x) * c), rtol=1e-12)
    np.testing.assert_allclose(adapter.to_numpy(grads)["x"], (1 - np.tanh(x) ** 2) * c, rtol=1e-12)
