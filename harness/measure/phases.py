"""One training step of a cell, as phases, and the meters that watch them.

A step is ``forward`` -> ``backward`` (-> ``step``, one optimizer update, when an
optimizer is asked for), run through the adapter's `split_vjp`. Where an adapter cannot
split (`split_vjp` is None), the gradient is one call of `value_and_grad` and only
``total`` (and ``step``) exist: no phase figure is made up.

The step does what a training loop does with its references, because that is what
decides memory: the forward state lives until the backward has run and is then
dropped; the gradients live through the optimizer update and are then dropped (or
handed back once, for the gradient check, outside every measured window).

A *meter* is told where the step and its phases begin and end: `MemoryMeter`
(harness/measure/memory_meter.py) reads the probes (retained, step peak and footprint
per phase, live bytes after forward/backward), `TimeMeter` the clock. `total` is the
peak (or the wall time) over the whole step.
"""

import time

from harness.measure import probes

JOINT = "gradient"  # the internal name of an unsplit value_and_grad call


class Step:
    """The phases of one training step of (adapter, loss) on `params`/`inputs`."""

    def __init__(self, adapter, loss, params, inputs, mode, optimizer=None, lr=1e-3):
        self.adapter = adapter
        self.params = params
        self.inputs = inputs
        split = adapter.split_vjp(loss, mode)
        if split is None:
            self.kind = "joint"
            self.forward = self.backward = None
            self.joint = adapter.value_and_grad(loss, mode)
        else:
            self.kind = "split"
            self.forward, self.backward = split
            self.joint = None
        self.update = adapter.optimizer(optimizer, params, lr) if optimizer else None

    def phases(self):
        names = ["forward", "backward"] if self.kind == "split" else [JOINT]
        return names + (["step"] if self.update else [])

    def run(self, meter, keep_grads=False):
        """One step under `meter`; the gradients when `keep_grads`, else None."""
        adapter = self.adapter
        meter.begin_step()
        if self.kind == "split":
            meter.begin("forward")
            state = self.forward(self.params, self.inputs)
            adapter.sync(state)
            meter.end("forward", live="after_forward")
            meter.begin("backward")
            grads = self.backward(state)
            adapter.sync(grads)
            del state  # the training loop lets the graph go once backward has run
            meter.end("backward", live="after_backward")
        else:
            meter.begin(JOINT)
            _, grads = self.joint(self.params, self.inputs)
            adapter.sync(grads)
            meter.end(JOINT, live="after_backward")
        if self.update is not None:
            meter.begin("step")
            self.params = self.update(self.params, grads)
            adapter.sync(self.params)
            meter.end("step")
        meter.end_step()
        return grads if keep_grads else None


class TimeMeter:
    """Wall time per phase and of the whole step, synchronised by the Step (the adapter's
    `sync` runs inside each phase), and beside it the process's CPU time (user + sys of
    all its threads): a framework that spins or runs more threads shows it there."""

    def __init__(self):
        self.samples, self.cpu_samples = {}, {}
        self._t_phase = self._t_step = self._c_phase = self._c_step = None

    def begin_step(self):
        self._c_step = time.process_time()
        self._t_step = time.perf_counter()

    def begin(self, phase):
        self._c_phase = time.process_time()
        self._t_phase = time.perf_counter()

    def end(self, phase, live=None):
        self.samples.setdefault(phase, []).append(time.perf_counter() - self._t_phase)
        self.cpu_samples.setdefault(phase, []).append(time.process_time() - self._c_phase)

    def end_step(self):
        self.samples.setdefault("total", []).append(time.perf_counter() - self._t_step)
        self.cpu_samples.setdefault("total", []).append(time.process_time() - self._c_step)

    def clear(self):
        self.samples, self.cpu_samples = {}, {}


def phase_figures(values, combine):
    """{phase: value} with the internal joint phase folded into total only."""
    out = {phase: values[phase] for phase in ("forward", "backward", "step") if phase in values}
    out["total"] = combine(values.values())
    return out


def settle_and_reset(rss):
    """Between steps: collect, trim the heap, reset the HWM (no new baseline)."""
    probes.settle()
    rss.reset()


class NullMeter:
    """Watches nothing: warm-up steps."""

    def begin_step(self):
        pass

    def begin(self, phase):
        pass

    def end(self, phase, live=None):
        pass

    def end_step(self):
        pass
