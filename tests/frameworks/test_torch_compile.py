"""torch "compiled" really compiles: each loss gets its own Dynamo cache entry, and a
silent fallback to eager is an error.

Found by `python -m harness check`: with one shared closure compiled for every
workload, Dynamo recompiled per workload and dtype and, past its recompile limit (8),
ran the later workloads eagerly while they were reported as "compiled".
Both tests together compile a tiny function 4 times: ~25 s here with an empty
Inductor cache (they are the only torch.compile tests besides chained_dot's).
"""

import numpy as np
import pytest

from harness import frameworks

pytestmark = pytest.mark.slow  # acceptance: torch.compile with Inductor's C++ builds

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


def test_more_steps_than_the_recompile_limit_each_compile():
    # One step per shape, as `harness check` makes one per workload and dtype. With a
    # code object shared by the steps, the one past Dynamo's recompile_limit (8; 2
    # here, to keep the test to 3 tiny compiles) would raise FailOnRecompileLimitHit.
    from torch._dynamo.utils import counters

    adapter = frameworks.get("torch").load("cpu", "compiled")
    graphs = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(recompile_limit=2):
        for n in range(3):
            step = adapter.value_and_grad(tanh_loss, "compiled")
            shape = (2, n + 1)
            step(adapter.from_numpy({"x": np.ones(shape)}), adapter.from_numpy({"c": np.ones(shape)}))
    assert counters["stats"]["unique_graphs"] == graphs + 3
