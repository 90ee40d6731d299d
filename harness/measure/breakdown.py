"""Where the bytes of a step go: the record's ``breakdown_bytes`` and ``breakdown_method``.

Categories, each counted in bytes with the method named beside it (or null, with the
reason, where the framework gives no way to see):

- ``params``, ``inputs``: the arrays the step is given (in the baseline: they are not
  part of the step peak, shown for scale);
- ``gradients``: the returned gradient arrays, once per buffer;
- ``optimizer_state``: what the optimizer keeps between steps (Adam's moments; 0
  without ``--optimizer``): part of ``retained_bytes`` after the first step;
- ``saved_activations``: what the forward pass keeps for the backward, at the end of
  forward, once per buffer, params and inputs excluded: from the adapter's
  `saved_activation_bytes` hook (the reference engine's ledger, torch's saved-tensor
  hooks, the leaves of JAX's VJP residuals, PyTensor's split outputs); where the
  adapter says the framework cannot list them (TensorFlow, autograd:
  `saved_activations_from_rss`), the resident bytes live at the end of forward above
  the step's start, and the method says so;
- ``temporaries``: step peak - saved activations - gradients, never below 0: what
  neither explains (intermediate cotangents, buffers of the backward's kernels,
  allocator slack). Saved activations are partly freed before the backward's peak and
  gradients are partly not yet made, so this is a lower bound of the transient bytes.

The hooks run in one step of their own after the measured steps (`count`), so they
never touch a measured figure.
"""

from harness import figures
from harness.measure.phases import NullMeter

ONCE = "once per buffer"
CATEGORIES = ("params", "inputs", "gradients", "optimizer_state", "saved_activations", "temporaries")
NO_SPLIT = (
    "the gradient is one call here (no forward/backward split): there is no end of forward to count at"
)
RSS_METHOD = (
    "resident bytes live at the end of forward above the step's start (RSS: the framework has no way "
    "to list what it saved; includes the loss, allocator slack and anything it caches)"
)


def count(adapter, step):
    """One more step with the adapter's counting hooks on: {category: (bytes or None,
    method or reason)} for every category except temporaries."""
    found = {}
    if step.kind != "split":
        found["saved_activations"] = (None, NO_SPLIT)
        grads = step.run(NullMeter(), keep_grads=True)
    else:
        plain = step.forward

        def forward(params, inputs):
            with adapter.saving():
                state = plain(params, inputs)
                adapter.sync(state)
            if adapter.saved_activations_from_rss:
                found["saved_activations"] = (None, RSS_METHOD)  # filled in by `assemble`
            else:
                found["saved_activations"] = adapter.saved_activation_bytes(state, params, inputs)
            return state

        step.forward = forward
        try:
            grads = step.run(NullMeter(), keep_grads=True)
        finally:
            step.forward = plain
    found["params"] = (_total(adapter, step.params), f"bytes of the parameter arrays, {ONCE}")
    found["inputs"] = (_total(adapter, step.inputs), f"bytes of the input arrays, {ONCE}")
    found["gradients"] = (_total(adapter, grads), f"bytes of the returned gradients, {ONCE}")
    found["optimizer_state"] = _optimizer_state(adapter, step.update)
    return found


def _total(adapter, tree):
    return int(sum(adapter.buffer_bytes(tree).values()))


def _optimizer_state(adapter, update):
    if update is None:
        return 0, "no optimizer in this cell (--optimizer): nothing kept"
    arrays = getattr(update, "state_arrays", None)
    if arrays is None:
        return None, f"the {adapter.name} adapter's optimizer does not say what it keeps (no state_arrays)"
    return _total(adapter, arrays()), f"bytes of the arrays the optimizer keeps between steps, {ONCE}"


def assemble(counts, steady):
    """(breakdown_bytes, breakdown_method) from `count`'s findings and the steady step
    as a record (`figures.value` reads its step peak: a CUDA cell's is the device
    allocator's), with its live bytes after forward for adapters that count saved
    activations by RSS."""
    counts = dict(counts)
    if counts["saved_activations"][1] == RSS_METHOD:
        live = figures.value(steady, "live.after_forward")
        counts["saved_activations"] = (live, RSS_METHOD)
    saved = counts["saved_activations"][0]
    gradients = counts["gradients"][0]
    peak = figures.value(steady, "step_peak")
    if saved is None or gradients is None or peak is None:
        counts["temporaries"] = (None, "needs saved activations, gradients and the step peak")
    else:
        counts["temporaries"] = (
            max(0, peak - saved - gradients),
            "step peak - saved activations - gradients, at least 0 (what neither explains: the "
            "backward's intermediate cotangents and kernel buffers, allocator slack; a lower bound)",
        )
    return (
        {name: counts[name][0] for name in CATEGORIES},
        {name: counts[name][1] for name in CATEGORIES},
    )
