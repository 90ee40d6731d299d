"""One eager step of a workload in an adapter loaded in this process, run once so
that what it keeps (saved tensors, an optimizer's state) exists to be counted."""

import pytest

from harness import frameworks, workloads
from harness.measure.phases import NullMeter, Step


def stepped(name, workload, size, optimizer=None):
    """(adapter, step, problem); skips the test where the framework is not here."""
    adapter = frameworks.get(name)
    ok, why = adapter.available()
    if not ok:
        pytest.skip(why)
    adapter.load("cpu", "eager")
    problem = workloads.build(workload, size, "float32")
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
    step = Step(adapter, problem.loss, params, inputs, "eager", optimizer)
    step.run(NullMeter())
    return adapter, step, problem
