"""Where a native step's bytes go, where the framework's own hooks can tell.

The same categories as an op-set cell's breakdown (harness/measure/breakdown.py), from
one more unmeasured step after the measured ones. A native step is the file's own
code, so gradmem sees only what the framework shows from outside it:

- torch: ``torch.autograd.graph.saved_tensors_hooks`` around the step see every tensor
  autograd saves for the backward; the most bytes of them alive at once (once per
  storage, the state's own tensors left out) are the saved activations, which peak
  when the forward ends. Parameters, their gradients and the optimizer's state are
  read from the ``torch.optim`` optimizers (else the ``nn.Module``s) found in the state
  (its dicts, lists and tuples walked), inputs are the state's other tensors;
- every other framework: each category null, saying why (its autodiff offers no hook
  to count through, and the step's arrays are the file's own).

Temporaries are computed from these as for every cell (`breakdown.assemble`).
"""

import weakref

from harness.measure.phases import NullMeter

ONCE = "once per storage"


def count(adapter, step):
    """{category: (bytes or None, method or reason)} for every category but temporaries."""
    if adapter.name == "torch":
        return _torch(adapter, step)
    reason = (f"a native {adapter.name} step is the file's own code: {adapter.name} has no hook gradmem can "
              f"count its arrays through")
    found = {name: (None, reason) for name in ("params", "inputs", "gradients", "optimizer_state", "saved_activations")}
    step.run(NullMeter())
    return found


def _torch(adapter, step):
    import torch

    optimizers = _walk(step.state, torch.optim.Optimizer)
    modules = _walk(step.state, torch.nn.Module)
    if optimizers:
        params = [p for opt in optimizers for group in opt.param_groups for p in group["params"]]
        where = "the parameters of the torch.optim optimizer(s) in the state"
    else:
        params = [p for module in modules for p in module.parameters()]
        where = "the parameters of the nn.Module(s) in the state" if modules else "no optimizer or module in the state"
    buffers = [b for module in modules for b in module.buffers()]
    plain = [t for t in _walk(step.state, torch.Tensor) if not t.requires_grad]
    outside = set(adapter.buffer_bytes([params, buffers, plain]))
    saved = SavedPeak(adapter, outside)
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        step.run(NullMeter())
    grads = [p.grad for p in params if p.grad is not None]
    found = {
        "saved_activations": (saved.peak, "torch.autograd.graph.saved_tensors_hooks around one more step: the "
                              f"most bytes of saved tensors alive at once (the forward's end), {ONCE}, the "
                              "state's parameters, buffers and tensors left out"),
        "params": (_bytes(adapter, params), f"{where}, {ONCE}"),
        "inputs": (_bytes(adapter, plain), f"the tensors in the state's dicts, lists and tuples that need no "
                   f"gradient, {ONCE}"),
        "gradients": (_bytes(adapter, grads), f"the .grad of those parameters after the step, {ONCE} (0 where "
                      "the step sets them to None before it ends)"),
    }
    if optimizers:
        state = [v for opt in optimizers for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
        found["optimizer_state"] = (_bytes(adapter, state), f"the tensors the torch.optim optimizer(s) keep, {ONCE}")
    else:
        found["optimizer_state"] = (None, "no torch.optim optimizer in the state: what the step keeps is its own")
    return found


class SavedPeak:
    """A saved-tensor pack hook that keeps a running count of the bytes of saved
    tensors alive (each storage once), and its highest value. A saved tensor stays what
    is saved; a weak reference's callback takes it off the count when autograd lets it go."""

    def __init__(self, adapter, outside):
        self.adapter, self.outside = adapter, outside
        self.live = {}  # storage key -> [bytes, saved tensors alive on it]
        self.total = self.peak = 0
        self._refs = {}  # id -> the weak reference (kept alive so that its callback runs)

    def pack(self, tensor):
        for key, nbytes in self.adapter.buffer_bytes(tensor).items():
            if key in self.outside:
                continue
            entry = self.live.setdefault(key, [nbytes, 0])
            if entry[1] == 0:
                self.total += nbytes
                self.peak = max(self.peak, self.total)
            entry[1] += 1
            ref = weakref.ref(tensor, lambda ref, key=key: self._gone(ref, key))
            self._refs[id(ref)] = ref  # by id: a weak reference compares its tensors, elementwise
        return tensor

    @staticmethod
    def unpack(tensor):
        return tensor

    def _gone(self, ref, key):
        self._refs.pop(id(ref), None)
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.total -= entry[0]
            del self.live[key]


def _walk(tree, kind, seen=None):
    """The objects of type `kind` in `tree`: its dicts, lists and tuples walked."""
    seen = set() if seen is None else seen
    if id(tree) in seen:
        return []
    seen.add(id(tree))
    if isinstance(tree, kind):
        return [tree]
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, (list, tuple)):
        return [found for item in tree for found in _walk(item, kind, seen)]
    return []


def _bytes(adapter, tensors):
    return int(sum(adapter.buffer_bytes(list(tensors)).values()))
