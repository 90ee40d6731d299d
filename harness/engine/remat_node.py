"""What a recomputed stretch of the graph is made of, shared by the sqrt segments
(remat.py) and revolve's chain (remat_revolve.py): the one node that stands for it,
and its steps run on raw values, which record nothing."""

from harness.engine.tape import Node, Var
from harness.remat_strategies import run_steps


def one_node(name, parents, backprop, out):
    """A node for `out` whose VJPs all come from one ``backprop(g) -> {parent index:
    cotangent}``, run on the first call (one recomputation serves every input)."""
    shared = _SharedCotangents(backprop)
    vjps = [None if parent is None else shared.vjp(i) for i, parent in enumerate(parents)]
    return Var(out, Node(name, tuple(parents), vjps, out.shape, out.dtype))


class _SharedCotangents:
    def __init__(self, backprop):
        self.backprop, self.cotangents = backprop, None

    def vjp(self, i):
        return lambda g: self.take(i, g)

    def take(self, i, g):
        if self.cotangents is None:
            backprop, self.backprop = self.backprop, None
            self.cotangents = backprop(g)
        return self.cotangents.pop(i)


def value_of(a):
    """The raw array of a traced or plain value."""
    return a.value if type(a) is Var else a


def steps_raw(step, x, start, stop, consts):
    """Steps start..stop-1 on raw values: nothing recorded (the ledger still counts)."""
    return run_steps(step, value_of(x), start, stop, {k: value_of(v) for k, v in consts.items()})
