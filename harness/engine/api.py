"""The entry points: `vjp` (forward now, backward later) and `value_and_grad`.

A differentiated argument is an array or a flat dict of arrays (a model's params);
each array becomes a leaf `Var`, `f` runs traced, and `backward` walks the recorded
graph from the loss. Other arguments are passed through untouched and never traced.
"""

import functools
import gc
import weakref

from harness.engine import xp
from harness.engine.backward import backward as backward_pass
from harness.engine.backward import check_order
from harness.engine.tape import Leaf, Var
from harness.engine.trace import tracing


def vjp(f, *args, argnums=0, order="heap", ledger=None):
    """Run ``f(*args)`` traced. Returns ``(value, backward)``.

    ``backward(seed=None)`` returns the gradients of args[argnums] (one item if
    `argnums` is an int, else a tuple; a dict argument gets a dict). The seed defaults
    to 1 for a scalar loss; a non-scalar output needs an explicit cotangent. The
    recorded graph is released by the first call, so `backward` runs once. Python's
    cyclic collector is paused from the forward pass until `backward` has run, or has
    been dropped unrun (`collector_paused`).
    """
    check_order(order)
    argnums, single = _normalize_argnums(argnums, len(args))
    boxed, leaves = list(args), {}
    for i in argnums:
        boxed[i], leaves[i] = _box(args[i], i)
    zeros = xp.array_module(*_arrays(args[i] for i in argnums)).zeros
    if ledger is not None:
        ledger.mark("forward")
    resume = collector_paused()
    try:
        with tracing(ledger, order=order):
            out = f(*boxed)
    except BaseException:
        resume()
        raise
    del boxed
    if type(out) is Var:
        value, root = out.value, out.node
    else:  # the output does not depend on the arguments: all gradients are zero
        value, root = xp.array_module(out).asarray(out), None
    del out
    if value.dtype.kind != "f":
        resume()
        raise TypeError(f"vjp: f must return a floating array, got {value.dtype}")
    graph = [root]

    def backward(seed=None):
        if not graph:
            raise RuntimeError("backward() runs once: the graph was released by the first call")
        root = graph.pop()
        if ledger is not None:
            ledger.mark("backward")
        flat = [(i, key, leaf) for i in argnums for key, leaf in _items(leaves[i])]
        try:
            seed = _seed(seed, value, ledger)
            grads = [None] * len(flat) if root is None else \
                backward_pass(root, seed, [leaf for _, _, leaf in flat], order, ledger)  # fmt: skip
        finally:
            root = seed = None  # the graph is gone before the collector may run again
            resume()
        result = {i: {} if isinstance(leaves[i], dict) else None for i in argnums}
        for (i, key, leaf), g in zip(flat, grads):
            if g is None:
                g = zeros(leaf.shape, dtype=leaf.dtype)
                if ledger is not None:
                    ledger.track(g, "backward:zeros")
            if key is None:
                result[i] = g
            else:
                result[i][key] = g
        if ledger is not None:
            ledger.mark("done")
        return result[argnums[0]] if single else tuple(result[i] for i in argnums)

    resume = weakref.finalize(backward, resume)  # (dropped unrun: the collector resumes then)
    return value, backward


def value_and_grad(f, argnums=0, order="heap", ledger=None):
    """``value_and_grad(f, argnums)(*args) -> (loss, grads)`` for a scalar-valued `f`.

    order: "heap" (max-heap by creation order, PyTorch's), "bfs" or "dfs".
    ledger: a `Ledger` to account every buffer in, or None for no accounting.
    """
    check_order(order)

    @functools.wraps(f)
    def value_and_grad_f(*args):
        value, backward = vjp(f, *args, argnums=argnums, order=order, ledger=ledger)
        if value.size != 1:
            del backward  # (unrun: the collector resumes now, not when the traceback goes)
            raise ValueError(
                f"value_and_grad: f must return a scalar to be differentiated, got an "
                f"array of shape {tuple(value.shape)} (use vjp and pass backward a cotangent)"
            )
        return value, backward()

    return value_and_grad_f


def grad(f, argnums=0, order="heap", ledger=None):
    """Like value_and_grad, returning the gradients only."""
    value_and_grad_f = value_and_grad(f, argnums, order, ledger)
    return functools.wraps(f)(lambda *args: value_and_grad_f(*args)[1])


_pauses = [0, False]  # passes holding the collector off now; was it on before the first?


def collector_paused():
    """Pause Python's cyclic garbage collector for one pass, forward to backward; returns
    the function that ends the pause (once; later calls do nothing). The collector
    runs again when no pass holds it, if it ran before the first.

    The engine makes no reference cycles: every buffer is freed by reference counting
    the moment its last holder lets go, so pausing frees nothing later
    (tests/engine/test_engine_memory.py). But a step of small arrays makes thousands
    of objects (nodes, closures, recipes): the collector would walk them every 700
    allocations while the pass runs (8 % of seq2seq_attention's step at small), and
    once more, the whole graph, at the first allocation after a pause that ended with
    the forward pass (~2 ms, 10 % of that step). Cycles the caller's own code makes are
    collected once the pass is over."""
    if _pauses[0] == 0:
        _pauses[1] = gc.isenabled()
        gc.disable()
    _pauses[0] += 1
    done = []

    def resume():
        if done:
            return
        done.append(True)
        _pauses[0] -= 1
        if _pauses[0] == 0 and _pauses[1]:
            gc.enable()

    return resume


def _normalize_argnums(argnums, nargs):
    single = isinstance(argnums, int)
    argnums = (argnums,) if single else tuple(argnums)
    if not argnums or len(set(argnums)) != len(argnums):
        raise ValueError(f"argnums must name distinct arguments, got {argnums!r}")
    for i in argnums:
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise ValueError(f"argnums {argnums!r} out of range for {nargs} arguments")
    return tuple(i % nargs for i in argnums), single


def _box(arg, i):
    """A differentiated argument as leaf Vars (the same structure), and its leaves."""
    if isinstance(arg, dict):
        boxed, leaves = {}, {}
        for key, value in arg.items():
            _check_differentiable(value, f"argument {i}[{key!r}]")
            leaves[key] = Leaf(value.shape, value.dtype)
            boxed[key] = Var(value, leaves[key])
        return boxed, leaves
    _check_differentiable(arg, f"argument {i}")
    leaf = Leaf(arg.shape, arg.dtype)
    return Var(arg, leaf), leaf


def boxed_leaves(arg):
    """A differentiated argument as traced leaves, for a trace with no backward pass
    (a planning trace)."""
    return _box(arg, 0)[0]


def _check_differentiable(value, where):
    if type(value) is Var:
        raise TypeError(f"{where} is already traced: nested differentiation is not supported")
    if not xp.is_array(value):
        raise TypeError(
            f"{where} is a {type(value).__name__}; a differentiated argument must be an "
            "array or a flat dict of arrays"
        )
    if value.dtype.kind != "f":
        raise TypeError(
            f"{where} has dtype {value.dtype}; only floating arrays can be differentiated "
            "(pass integer and boolean arrays in an argument not in argnums)"
        )


def _items(leaves):
    return leaves.items() if isinstance(leaves, dict) else [(None, leaves)]


def _arrays(args):
    for arg in args:
        yield from (arg.values() if isinstance(arg, dict) else [arg])


def _seed(seed, value, ledger):
    module = xp.array_module(value)
    if seed is None:
        if value.size != 1:
            raise ValueError(
                f"backward: the function returned an array of shape {tuple(value.shape)}; "
                "a gradient needs a scalar loss, or pass a cotangent: backward(seed)"
            )
        seed = module.ones(value.shape, dtype=value.dtype)
        if ledger is not None:
            ledger.track(seed, "backward:seed")
        return seed
    seed = module.asarray(seed)
    if seed.shape != value.shape or seed.dtype != value.dtype:
        raise ValueError(
            f"backward: the seed is {seed.dtype}{tuple(seed.shape)} but the output is "
            f"{value.dtype}{tuple(value.shape)}"
        )
    return seed
