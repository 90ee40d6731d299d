"""What a VJP keeps: `save(array, why)`, and stand-ins for arrays that are cheap to remake.

Every VJP maker (prims/) passes each array its closure will read through
``save(x, why)``, at forward time, and reads it back with ``value(saved)`` when the VJP
runs. `save` decides how x is kept, always for the fewest bytes:

- as it is, the common case: the buffer is counted once however many VJPs save it
  (views included), and the ledger notes `why` against it;
- as a **recipe** when x is a copy or a cheap elementwise function of arrays that cost
  less to keep than x does, because they are saved already or are the caller's: a
  concatenation of saved maps, an upsampled map, a stack of saved states, ``h - n`` of
  two saved GRU tensors, a reshape or slice of any of these. The VJP remakes x when it
  runs (``value``), bit for bit the forward's array, as a transient of that VJP; a
  conv or matmul reading a concatenation or an upsampled map remakes only the slab it
  is working on (`Rebuilt.rows`, `Rebuilt.parts`);
- as a compact copy when x is a small slice of a bigger buffer that nothing else keeps
  (a GRU's gate slice of its (B, 3H) recurrent product): a saved view would keep the
  whole buffer.

A traced output of a cheap prim (`Prim.remakeable`) carries a `Recipe`: its prim, its
operands by weak reference (it never keeps them alive by itself), their own recipes
and its parameters. A new buffer a cheap prim makes from untraced values alone while
tracing has no Var to carry one, so its recipe is noted by the array's identity
(`note_untraced`) until the array is freed: tiny_nerf's positional encoding, made from
the input points, is kept as those. `apply` shows a maker's operands' recipes to `save`
while the maker runs; an operand freed since is followed through its own recipe. An operand that is a parameter (a leaf's value), a Python scalar, or an
array some VJP saved already costs a recipe nothing; any other costs its buffer, or its
own recipe if that is cheaper. The recipe is kept only if it costs less than x.

Keeping an operand saved already costs nothing because that operand's savers were
recorded earlier, so their VJPs run later in the backward pass: it outlives this
VJP anyway. (If a schedule ran them earlier, the recipe's own reference keeps the
operand until this VJP has run: correct, just not free.)
"""

import functools
import math
import weakref

from numpy import ndarray

from harness.engine import xp
from harness.engine.trace import current_ledger, current_phase

MAX_DEPTH = 8  # how far back a recipe may reach (a recurrence would otherwise chain every step)

_saved = {}  # id(owning array) -> weakref: buffers some VJP saved, while they live
_operand_recipes = [{}]  # id(operand value) -> Recipe, for the maker running now


def _owner_bytes(array):
    return xp.owner(array).nbytes


def is_saved(array):
    """Does some VJP keep `array`'s buffer?"""
    return id(xp.owner(array)) in _saved


def _mark_saved(array, why):
    base = array if array.base is None else xp.owner(array)
    key = id(base)
    if key not in _saved:
        try:
            _saved[key] = weakref.ref(base, functools.partial(_forget, key))
        except TypeError:  # an array type without weak references: never counted as saved
            pass
    ledger = current_ledger()
    if ledger is not None:
        ledger.note_saved(base, why)


def _forget(key, _):
    _saved.pop(key, None)


class Recipe:
    """How an output was made by a cheap prim, without holding its operands."""

    __slots__ = ("prim", "operands", "recipes", "free", "extra", "params", "shape", "dtype")

    def __init__(self, prim, operands, recipes, free, extra, params, out):
        self.prim = prim
        self.operands = tuple([weakref.ref(v) if type(v) is ndarray else _weak(v) if xp.is_array(v) else v
                               for v in operands])  # fmt: skip
        self.recipes = recipes  # per operand: its Recipe or None
        self.free = free  # per operand: True for a leaf's value (the caller holds it)
        self.extra = extra  # static arguments passed by position (reshape's shape)
        self.params = params
        self.shape, self.dtype = out.shape, out.dtype  # of the output it makes

    def resolved(self):
        """The operands as values (None for an array that has been freed)."""
        return [ref() if type(ref) in _REF_TYPES else ref for ref in self.operands]

    def cost(self, depth=0, seen=None):
        """Bytes that keeping the operands instead of the output would add (each
        buffer once, `seen` holding the ones counted already)."""
        if depth > MAX_DEPTH:
            return math.inf
        total, seen = 0, set() if seen is None else seen
        for value, recipe, free in zip(self.resolved(), self.recipes, self.free):
            if value is None:  # freed: only its own recipe can remake it
                if recipe is None:
                    return math.inf
                total += recipe.cost(depth + 1, seen)
                continue
            if not xp.is_array(value) or free or is_saved(value):
                continue
            key = id(xp.owner(value))
            if key in seen:
                continue
            seen.add(key)
            own = _owner_bytes(value)
            total += own if recipe is None else min(own, recipe.cost(depth + 1, set(seen)))
        return total


class _NoRef:
    """Stands for the weak reference an array type cannot give: always dead, so a
    recipe through such an array is never followed."""

    __slots__ = ()

    def __call__(self):
        return None


_NO_REF = _NoRef()
_REF_TYPES = (weakref.ReferenceType, _NoRef)


def _weak(array):
    try:
        return weakref.ref(array)
    except TypeError:
        return _NO_REF


class Rebuilt:
    """A saved array kept as its recipe's operands (themselves saved arrays, Rebuilts
    or scalars): `value()` remakes it, `rows` and `parts` remake a piece of it."""

    __slots__ = ("prim", "operands", "extra", "params", "shape", "dtype")

    def __init__(self, prim, operands, extra, params, shape, dtype):
        self.prim, self.operands, self.extra, self.params = prim, operands, extra, params
        self.shape, self.dtype = shape, dtype

    ndim = property(lambda self: len(self.shape))

    def value(self):
        return self.prim.run_forward([value(v) for v in self.operands] + list(self.extra), self.params)

    def rows(self, lo, hi):
        """``value()[:, :, lo:hi]`` of an NCHW map (a conv's input slab), made without
        the whole map where the recipe allows."""
        name, params = self.prim.name, self.params
        if name == "concat" and params.get("axis", 0) % 4 != 2:
            return self.prim.forward(*[input_rows(v, lo, hi) for v in self.operands], **params)
        if name == "upsample2d":
            s, first, src = self._upsample_source(lo, hi)
            return self.prim.forward(src, s)[:, :, lo - first * s : hi - first * s]
        return self.value()[:, :, lo:hi]

    def _upsample_source(self, lo, hi):
        """(scale, first source row, the source rows) an upsampled map's rows lo..hi-1
        are made from: 1/scale^2 of their bytes."""
        s = self.extra[0] if self.extra else self.params.get("scale", 2)
        return s, lo // s, input_rows(self.operands[0], lo // s, -(-hi // s))

    def rows_into(self, lo, hi, dest):
        """``dest[...] = rows(lo, hi)``, written straight into `dest` (a conv's padded
        input slab, full width) where the recipe allows: a channel concatenation part by
        part, an upsampled map by its scale*scale strided views, so that the slab's
        rows are not made first and copied after."""
        name, params = self.prim.name, self.params
        if name == "concat" and params.get("axis", 0) % 4 == 1:
            start = 0
            for v in self.operands:
                copy_rows(v, lo, hi, dest[:, start : start + v.shape[1]])
                start += v.shape[1]
            return
        if name == "upsample2d":
            s, first, src = self._upsample_source(lo, hi)
            for a in range(s):  # dest row k is map row lo + k, source row (lo + k) // s
                k0 = (a - lo) % s  # dest's first row with (lo + k) % s == a
                if k0 < hi - lo:
                    rows = src[:, :, (lo + k0) // s - first :][:, :, : len(range(k0, hi - lo, s))]
                    for b in range(s):
                        dest[:, :, k0::s, b::s] = rows
            return
        dest[...] = self.rows(lo, hi)

    def parts(self, axis):
        """[(start, stop, part)] if this is a concatenation along `axis`, else None;
        a part that is itself such a concatenation is given as its own parts."""
        if self.prim.name != "concat" or self.params.get("axis", 0) % len(self.shape) != axis % len(self.shape):
            return None
        out, start = [], 0
        for v in self.operands:
            inner = v.parts(axis) if type(v) is Rebuilt else None
            for lo, hi, part in inner or [(0, v.shape[axis], v)]:
                out.append((start + lo, start + hi, part))
            start += v.shape[axis]
        return out


def input_rows(x, lo, hi):
    """``x[:, :, lo:hi]`` of a saved NCHW map, remade for that slab only if need be."""
    return x.rows(lo, hi) if type(x) is Rebuilt else x[:, :, lo:hi]


def copy_rows(x, lo, hi, dest):
    """``dest[...] = x[:, :, lo:hi]`` of a saved NCHW map; a recipe writes its rows
    straight into dest (`Rebuilt.rows_into`)."""
    if type(x) is Rebuilt:
        x.rows_into(lo, hi, dest)
    else:
        dest[...] = x[:, :, lo:hi]


def value(saved):
    """The array a VJP saved (remade if it was kept as a recipe)."""
    return saved.value() if type(saved) is Rebuilt else saved


def save(x, why):
    """Keep `x` for a VJP at the least cost (module docstring); `why` says what reads it,
    and the ledger notes it against the buffer. Returns x, a compact copy of it, or a
    `Rebuilt`; the VJP reads it back with `value`."""
    recipes = _operand_recipes[-1]
    if type(x) is ndarray and not recipes:  # (most saves) an array no recipe could stand for
        _mark_saved(x, why)
        return x
    if not xp.is_array(x):
        return x
    return _keep(x, recipes.get(id(x)), why, 0)


def _keep(x, recipe, why, depth):
    """x kept for a VJP (x is None: freed already, kept as its recipe, which costs
    less than infinity: the caller checked)."""
    if recipe is not None and depth <= MAX_DEPTH and (x is None or not is_saved(x)) and recipe.cost() < (
            math.inf if x is None else _owner_bytes(x)):  # fmt: skip
        operands = []
        for v, r in zip(recipe.resolved(), recipe.recipes):
            operands.append(_keep(v, r, why, depth + 1) if xp.is_array(v) or (v is None and r is not None) else v)
        return Rebuilt(recipe.prim, operands, recipe.extra, recipe.params, recipe.shape, recipe.dtype)
    if recipe is not None and x.nbytes * 2 <= _owner_bytes(x) and not is_saved(x):
        x = _compact(x)  # a small slice of a buffer nobody keeps: keep the slice alone
    _mark_saved(x, why)
    return x


def _compact(x):
    copy = x.copy()
    ledger = current_ledger()
    if ledger is not None:
        ledger.track(copy, f"{current_phase()}:getitem")  # a copy of a slice: the op that sliced
    return copy


# id(array) -> (Recipe, weak reference): outputs of remakeable prims on untraced
# values made while tracing; the entry goes when the array does
_untraced = {}


def note_untraced(out, recipe):
    """`out` was made by `recipe` from untraced values alone (it has no Var to carry it)."""
    key = id(out)
    try:
        _untraced[key] = (recipe, weakref.ref(out, lambda _, key=key: _untraced.pop(key, None)))
    except TypeError:  # an array type without weak references: never remade
        pass


def untraced_recipe(value):
    """The Recipe of an untraced array made while tracing, or None."""
    entry = _untraced.get(id(value)) if _untraced else None
    return None if entry is None else entry[0]


class showing_recipes:
    """While a maker runs, `save` sees its operands' recipes ({id(value): Recipe})."""

    __slots__ = ("recipes",)

    def __init__(self, recipes):
        self.recipes = recipes

    def __enter__(self):
        _operand_recipes.append(self.recipes)

    def __exit__(self, *exc):
        _operand_recipes.pop()
