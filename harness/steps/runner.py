"""A native step inside a worker: built before the baseline, run under the cell's meter.

The worker (harness/measure/worker.py) loads the framework through its adapter as for
any cell (threads, device, the runtime warm-up), then calls `build` instead of building
an op-set problem: the file's ``setup(cfg)`` runs before the baseline, as an op-set
cell's parameters and inputs are made before it, and `NativeStep.run` is what the
memory and time passes call for each step, so the cold first step, the steady steps,
the step peak, retained, the CUDA allocator's figures and the time are taken by the
same meters as every cell's. The step is one opaque call: one phase, folded into
``total`` (phases.JOINT), as for a framework whose gradient is one call.

An exception in ``setup`` or ``step`` becomes `StepError`: one line naming the file,
the function, the exception and the line of the file it came through; the worker
records it without the traceback (harness/measure/failures.py).
"""

import os
import traceback
from types import SimpleNamespace

from harness.measure.phases import JOINT
from harness.steps import contract

GRAD_CHECK = contract.GRAD_CHECK
PREDICTION = {
    "state": "unsupported",
    "reason": "a native step is the file's own code: gradmem has no loss function to hand the framework's predictor",
}
#: the record's saved_by_op: no op-set forward to list the ops of (the breakdown's
#: saved activations, where the framework's hooks count them, stand for the total)
SAVED_BY_OP = {"ops": None, "bytes": None, "saved_activations_bytes": None, "backward": None,
               "method": "not applicable: native step (one opaque call of the file's own code, no op-set forward "
                         "whose ops to name)"}
STEP_KIND = "native"


class StepError(RuntimeError):
    """An exception raised by a native step's own code, said in one line."""

    one_line = True  # failures.from_exception records the message alone, no traceback


def build(adapter, cell):
    """(problem, step) of a native-step cell: `problem` carries what the memory pass
    records of the workload (its bound), `step` is a NativeStep on the file's state."""
    from harness import workloads
    from harness.workloads import loader

    module = loader.load(cell["workload"], run=True)  # imported here, in the worker, with its framework
    label = workloads.label(cell["workload"])
    cfg = contract.config(module, cell["size"], label, cell.get("batch"), cell["device"], cell["dtype"])
    bound, source = contract.bound(module, cfg)
    state = _call(module, label, "setup", module.setup, cfg)
    step = NativeStep(adapter, module, state, label)
    step.wait(state)
    problem = SimpleNamespace(name=cell["workload"], size=cell["size"], dtype=cell["dtype"], bound_bytes=bound,
                              bound_source=source, batch=cfg.get(module.BATCH_AXIS) if module.BATCH_AXIS else None)
    return problem, step


class NativeStep:
    """The file's ``step(state)`` with the face of phases.Step: `run(meter)` one step,
    measured as one phase."""

    kind = STEP_KIND
    forward = backward = joint = update = None  # no split: one opaque call
    params = inputs = None  # what an op-set step carries; a native step's are in its state

    def __init__(self, adapter, module, state, label):
        self.adapter, self.module, self.state, self.label = adapter, module, state, label

    def phases(self):
        return [JOINT]

    def program(self):
        sync = "its sync(state)" if getattr(self.module, "sync", None) else "the adapter's sync of what it returns"
        return (f"the file's own step(state), as written ({self.module.FRAMEWORK}); waited for by {sync}: "
                f"one call (no phase split)")

    def run(self, meter, keep_grads=False):
        """One step under `meter`. Returns None: its gradients are the file's own."""
        meter.begin_step()
        meter.begin(JOINT)
        returned = _call(self.module, self.label, "step", self.module.step, self.state)
        self.wait(returned)
        meter.end(JOINT)
        meter.end_step()
        return None

    def wait(self, returned):
        """Until the device has done what was asked: the file's sync(state), else the
        adapter's sync of `returned` (torch on CUDA synchronises the device)."""
        own = getattr(self.module, "sync", None)
        if own is not None:
            _call(self.module, self.label, "sync", own, self.state)
        elif returned is not None:
            self.adapter.sync(returned)


def _call(module, label, name, function, argument):
    try:
        return function(argument)
    except Exception as err:  # noqa: BLE001 - the user's code: any exception, said in one line
        raise StepError(f"native step {label}: {name}() raised {type(err).__name__}: {_first_line(err)}"
                        f"{_where(err, module)}") from err


def _first_line(err):
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else "(no message)"


def _where(err, module):
    """" (my_step.py line 12)": the innermost frame in the step's file, else the innermost."""
    frames = traceback.extract_tb(err.__traceback__)
    path = getattr(module, "__file__", None)
    own = [f for f in frames if path and os.path.abspath(f.filename) == os.path.abspath(path)]
    frame = (own or frames or [None])[-1]
    return f" ({os.path.basename(frame.filename)} line {frame.lineno})" if frame is not None else ""
