"""Recording: traced values, graph nodes, primitives.

A traced value is a `Var`: a raw array plus the `Node` that made it. A node holds its
parents (nodes, not values), one VJP closure per parent that needs a gradient, and its
output's shape and dtype. It does *not* hold its output: the user's code holds that,
and a consumer's VJP closure keeps it only if that VJP needs it. So what stays alive
after the forward pass is exactly what the VJPs saved.

A primitive (`Prim`) is a forward function on raw arrays plus, per array argument, a
VJP maker ``maker(out, *args, **params) -> (g -> cotangent)``, as in HIPS autograd.
The maker runs at forward time, only for arguments that need a gradient, and the
closure it returns captures exactly what that VJP needs: that is what the node saves.
Makers must compute metadata (shapes) outside the inner closure, so that the inner
closure does not capture an array just to read its shape.

There is no global tape list: the graph is the chain of parent links from the loss,
and it is freed as soon as nothing refers to it. Nodes are numbered in creation order
(PyTorch's sequence_nr), which the backward pass uses for its schedule.
"""

import contextlib
import functools
import itertools
import sys

import numpy as np

from harness.engine import saving, xp
from harness.engine.trace import stack as _traces

_sequence = itertools.count()

# Stack of node makers that replace `make_node` while they are active: the articulation
# plan (remat_articulation.py) uses one to record recipes instead of saved arrays.
_node_makers = []


@contextlib.contextmanager
def making_nodes(maker):
    """Record nodes with ``maker(prim, values, params, parents, out)`` in the body."""
    _node_makers.append(maker)
    try:
        yield
    finally:
        _node_makers.pop()


class Node:
    __slots__ = ("seq", "name", "parents", "vjps", "shape", "dtype", "__weakref__")

    def __init__(self, name, parents, vjps, shape, dtype):
        self.seq = next(_sequence)
        self.name = name
        self.parents = parents  # tuple of Node | None (None: argument not traced)
        self.vjps = vjps  # list of closure | None, aligned with parents
        self.shape = shape
        self.dtype = dtype

    def __repr__(self):
        return f"<{self.name} #{self.seq} {self.dtype}{list(self.shape)}>"


class Lazy(Node):
    """A node recorded without its VJPs (a rematerialised span): the backward pass
    calls ``rebuild()`` before running it, which recomputes the span and fills ``vjps``."""

    __slots__ = ("rebuild",)

    def __init__(self, name, parents, shape, dtype, rebuild):
        super().__init__(name, parents, None, shape, dtype)
        self.rebuild = rebuild


class Leaf(Node):
    """A variable the gradient is taken with respect to."""

    __slots__ = ()

    def __init__(self, shape, dtype):
        super().__init__("leaf", (), [], shape, dtype)


class Var:
    """A traced array: `value` is the raw array, `node` what computed it.

    Only `harness.engine.ops` functions understand it (the arithmetic operators call
    them). NumPy functions refuse it, rather than silently computing on the raw value
    and dropping the gradient.
    """

    __slots__ = ("value", "node", "recipe")
    __array_ufunc__ = None  # prims/operators.py replaces it: ndarray + Var -> ops.add

    def __init__(self, value, node, recipe=None):
        self.value = value
        self.node = node
        self.recipe = recipe  # how a cheap prim made it (saving.Recipe), or None

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)

    def __len__(self):
        return len(self.value)

    def __array__(self, *args, **kwargs):
        raise TypeError(
            "a traced value cannot become a plain array: use harness.engine.ops "
            "instead of NumPy functions inside a differentiated function"
        )

    def __bool__(self):
        return bool(self.value)

    def __repr__(self):
        return f"Var({self.value!r}, node={self.node!r})"


class Prim:
    """A primitive: forward on raw arrays; VJP makers for its array arguments.

    `n_arrays` leading positional arguments are operands (None: all positional ones,
    for variadic prims such as concat); the rest are static parameters. Operands in
    `nondiff` (take's indices, where's condition) are never differentiated. Operands
    of math prims must be floating arrays (or Python scalars, which never change the
    dtype); `structural` prims (reshape, concat...) accept any real dtype.
    `remakeable` prims (copies, views, cheap elementwise arithmetic, sin and cos) give
    their outputs a recipe, so that a VJP saving one may keep its operands instead
    (saving.py). `writes_into` is the forward of an elementwise prim that saves none of
    its operands, writing into a given buffer (``writes_into(*operands, out=buffer)``),
    so that its output may take a traced temporary's buffer (`donated`).
    """

    def __init__(self, forward, n_arrays=1, nondiff=(), structural=False, remakeable=False, writes_into=None):
        functools.update_wrapper(self, forward)
        self.name = forward.__name__.lstrip("_")
        self.forward = forward
        self.n_arrays = n_arrays
        self.nondiff = frozenset(nondiff)
        self.structural = structural
        self.remakeable = remakeable
        self.writes_into = writes_into
        self.make_vjp = None  # (argnum, out, *args, **params) -> (g -> cotangent)
        self.makers = None  # defvjp's makers, one per array argument (make_vjps calls them directly)

    def __call__(self, *args, **params):
        return apply(self, args, params)

    def run_forward(self, values, params, n=None):
        """The forward on raw values (`n` of them operands), always returning an array."""
        n = len(values) if n is None else n
        try:
            out = self.forward(*values, **params)
        except (ValueError, TypeError, IndexError) as error:
            kind = TypeError if isinstance(error, TypeError) else ValueError
            raise kind(f"{self.name}: {error} (operands: {describe(values[:n])})") from error
        if not xp.is_array(out):  # NumPy returns scalars from 0-d computations
            out = xp.array_module(*values[:n]).asarray(out)
        return out

    def __repr__(self):
        return f"<primitive {self.name}>"


def primitive(n_arrays=1, nondiff=(), structural=False, remakeable=False, writes_into=None):
    """Decorator: turn a forward function on raw arrays into a traced primitive."""
    return lambda forward: Prim(forward, n_arrays, nondiff, structural, remakeable, writes_into)


def defvjp(prim, *makers):
    """One VJP maker per array argument, `maker(out, *args, **params)`; None for an
    argument that is never differentiated."""
    prim.make_vjp = lambda argnum, out, *args, **params: makers[argnum](out, *args, **params)
    prim.makers = makers


def defvjp_argnum(prim, maker):
    """One maker for all arguments of a variadic prim: `maker(argnum, out, *args, **params)`."""
    prim.make_vjp = maker
    prim.makers = None


def apply(prim, args, params):
    """Run `prim` on raw values; record a node if any operand is traced."""
    n = len(args) if prim.n_arrays is None else min(prim.n_arrays, len(args))
    values = list(args)
    parents = None
    recipes = None  # id(operand value) -> its Recipe, for the makers' `save`
    for i in range(n):
        arg = args[i]
        if type(arg) is Var:
            if i in prim.nondiff:
                raise TypeError(f"{prim.name}: argument {i} cannot be differentiated")
            values[i] = arg.value
            if parents is None:
                parents = [None] * n
            parents[i] = arg.node
            if arg.recipe is not None:
                recipes = recipes or {}
                recipes[id(arg.value)] = arg.recipe
        elif isinstance(arg, np.generic):
            # A NumPy scalar is strongly typed under NEP 50 (np.float64(2) * float32
            # array is float64); as a Python scalar it is weak and keeps the dtype.
            values[i] = arg.item()
        elif (recipe := saving.untraced_recipe(arg)) is not None:
            recipes = recipes or {}
            recipes[id(arg)] = recipe
    arg = recipe = None  # the loop's last operand must not look referenced once more than the others (donated)
    _check_operands(prim, values, n)
    # (never under a node maker such as articulation's, which may keep operands by value)
    into = donated(args, values, n) if prim.writes_into is not None and parents is not None and not _node_makers else None
    if into is None:
        out = prim.run_forward(values, params, n)
    else:  # the temporary's buffer becomes the output: one activation fewer in flight
        out = prim.writes_into(*values[:n], out=into)
        recipes = None  # no recipe may name the overwritten operand
    ledger = _traces[-1][0] if _traces else None
    if ledger is not None:
        tag = _tag(_traces[-1][1], prim.name)
        if into is None:
            track_output(ledger, out, values[:n], tag)
        else:
            ledger.retag(out, tag)
    if parents is None or out.dtype.kind != "f":
        if parents is None and prim.remakeable and _traces and out.dtype.kind == "f" and xp.owner(out) is out:
            # a new buffer computed from untraced values alone (tiny_nerf's positional
            # encoding): no node, but a recipe, so that a VJP saving it may remake it
            # instead (a view costs nothing to keep: its buffer is its base's)
            saving.note_untraced(out, saving.Recipe(prim, values[:n], _operand_recipes(recipes, values, n),
                                                    [False] * n, tuple(values[n:]), params, out))
        return out
    make = _node_makers[-1] if _node_makers else make_node
    if recipes is None:
        node = make(prim, values, params, tuple(parents), out)
    else:
        with saving.showing_recipes(recipes):
            node = make(prim, values, params, tuple(parents), out)
    recipe = None
    if prim.remakeable and into is None:
        free = [type(arg) is Var and type(arg.node) is Leaf for arg in args[:n]]
        recipe = saving.Recipe(prim, values[:n], _operand_recipes(recipes, values, n), free, tuple(values[n:]), params, out)
    return Var(out, node, recipe)


def _operand_recipes(recipes, values, n):
    """Each operand's Recipe (a traced value's, or an untraced one's) or None."""
    return [recipes.get(id(v)) for v in values[:n]] if recipes else [None] * n


# ---- donation: writing an elementwise output over a temporary ---------------------------
#
# In ``relu(add(matmul(h, W), b))`` the matmul's output and the sum are temporaries:
# once add has read the product nothing can reach it, yet out of place the layer holds
# two activations at once. NumPy elides such temporaries in ``a + b`` expressions by
# their reference count; the engine does the same for its traced values. An operand is
# donated when its Var is held by this call alone and its array by that Var alone (so
# no VJP saved it, no view of it exists and no user name holds it), the array owns its
# buffer and already has the output's shape and dtype. The prims that take donations
# save none of their operands (`writes_into`), so the overwritten values are read by
# nobody. The reference counts of "held by this call alone" depend on the interpreter,
# so they are measured once at import (`_calibrate`) through this very code path,
# against a Var that a name holds too; where the two cannot be told apart nothing is
# ever donated.

_TEMPORARY_REFS = None  # (Var refs, array refs) of a temporary as `donated` sees them
_calibration = None  # while calibrating: the (Var refs, array refs) `donated` saw


def donated(args, values, n):
    """The buffer of a traced temporary among the operands that the output may be
    written into, or None."""
    if _TEMPORARY_REFS is None and _calibration is None:
        return None
    for i in range(n):
        candidate = args[i]
        if type(candidate) is not Var:
            continue
        refs = sys.getrefcount(candidate), sys.getrefcount(candidate.value)
        if _calibration is not None:
            _calibration.append(refs)
            return None
        if refs[0] > _TEMPORARY_REFS[0] or refs[1] > _TEMPORARY_REFS[1]:
            continue
        array = candidate.value
        if array.base is not None or not getattr(array.flags, "writeable", True):
            continue
        if array.shape == _output_shape(values[:n]):
            return array
    return None


def _output_shape(operands):
    """The shape an elementwise prim's output takes (NumPy's broadcasting), without
    NumPy's general rule where every array operand has one shape (the common case)."""
    shapes = [v.shape for v in operands if hasattr(v, "shape")]
    if all(shape == shapes[0] for shape in shapes):
        return shapes[0]
    return np.broadcast_shapes(*shapes)


def _calibrate():
    """Measure the reference counts `donated` sees for a temporary operand, first or
    second, and for one a name holds too; donate only if they tell the two apart."""
    global _TEMPORARY_REFS, _calibration
    unary = Prim(lambda x: x, writes_into=lambda x, out: x)
    binary = Prim(lambda x, y: x, n_arrays=2, writes_into=lambda x, y, out: x)
    unary.make_vjp = binary.make_vjp = lambda argnum, out, *args: None
    leaf = Leaf((2,), np.dtype(np.float64))
    temp = lambda: Var(np.zeros(2), leaf)
    plain = np.zeros(2)
    found = {}
    try:
        for name, call in [
            ("temporary", lambda: unary(temp())),  # as in tanh(add(matmul(h, W), b))
            ("first of two", lambda: binary(temp(), plain)),  # as in add(matmul(h, W), b)
            ("second of two", lambda: binary(plain, temp())),
        ]:
            _calibration = []
            call()
            found[name] = _calibration[0]
        named = temp()
        _calibration = []
        unary(named)
        found["named Var"] = _calibration[0]
        held = np.zeros(2)
        _calibration = []
        unary(Var(held, leaf))
        found["named array"] = _calibration[0]
    finally:
        _calibration = None
    temporary = found["temporary"]
    if (found["first of two"] == found["second of two"] == temporary
            and found["named Var"][0] > temporary[0] and found["named array"][1] > temporary[1]):  # fmt: skip
        _TEMPORARY_REFS = temporary


_tags = {}


def _tag(phase, name):
    """The ledger's tag of an output, "phase:prim" (made once per pair, not per op)."""
    tag = _tags.get((phase, name))
    if tag is None:
        tag = _tags[phase, name] = f"{phase}:{name}"
    return tag


def make_node(prim, values, params, parents, out):
    """The node of one call, with its VJP closures made now."""
    return Node(prim.name, parents, make_vjps(prim, values, params, parents, out), out.shape, out.dtype)


def make_vjps(prim, values, params, parents, out):
    """A VJP closure per traced operand (None for the others); each saves what its rule needs."""
    makers = prim.makers
    if makers is not None:  # (defvjp's: one maker per operand, called without make_vjp's dispatch)
        return [None if parent is None else makers[i](out, *values, **params) for i, parent in enumerate(parents)]
    return [None if parent is None else prim.make_vjp(i, out, *values, **params) for i, parent in enumerate(parents)]


def track_output(ledger, out, operands, tag):
    # An output that is a view of an operand (reshape, slice) is not a new buffer: if
    # the operand is the engine's it is counted already, if the caller's it is not ours.
    base = xp.owner(out)
    for value in operands:
        if xp.is_array(value) and xp.owner(value) is base:
            return
    ledger.track(out, tag)


_FLOAT_KINDS = "f"
_STRUCTURAL_KINDS = "biuf"


def _check_operands(prim, values, n):
    """The n operands among `values` must be arrays of one supported dtype, or Python scalars."""
    kinds = _STRUCTURAL_KINDS if prim.structural else _FLOAT_KINDS
    nondiff = prim.nondiff
    dtype = None
    for i in range(n):
        value = values[i]
        if nondiff and i in nondiff:
            continue
        if type(value) is np.ndarray:  # (most operands) an array: its dtype is checked below
            pass
        elif not xp.is_array(value):
            if prim.structural or not isinstance(value, (int, float)):
                raise TypeError(
                    f"{prim.name}: operand {i} is a {type(value).__name__}; "
                    f"expected an array{'' if prim.structural else ' or a Python float/int'}"
                )
            continue
        if value.dtype is dtype:  # (NumPy's dtypes are singletons: most operands end here)
            continue
        if value.dtype.kind not in kinds:
            wanted = "real" if prim.structural else "floating (float16, float32, float64)"
            raise TypeError(
                f"{prim.name}: unsupported dtype {value.dtype} for operand {i} of shape "
                f"{tuple(value.shape)}; {prim.name} needs {wanted} arrays"
            )
        if dtype is None:
            dtype = value.dtype
        elif value.dtype != dtype:
            raise TypeError(
                f"{prim.name}: operands have different dtypes ({describe(values[:n])}); "
                "cast them to one dtype first (mixing would silently change the precision)"
            )


def describe(values):
    """'float32(3, 4), 2.0' -- dtypes and shapes of arrays, other values as they are."""
    return ", ".join(
        f"{v.dtype}{tuple(v.shape)}" if xp.is_array(v) else repr(v) for v in values
    )


_calibrate()
