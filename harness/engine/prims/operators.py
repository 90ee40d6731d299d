"""Python's operators on traced values (readability in examples and tests): ``a + b``
is `add`, ``a @ b`` `matmul`, and NumPy's ``ndarray + Var`` comes here too; comparisons
give plain boolean arrays."""

from harness.engine.prims.elementwise import add, div, mul, neg, sub
from harness.engine.prims.linalg import matmul
from harness.engine.prims.shapes import getitem
from harness.engine.tape import Var

Var.__add__ = lambda self, other: add(self, other)
Var.__radd__ = lambda self, other: add(other, self)
Var.__sub__ = lambda self, other: sub(self, other)
Var.__rsub__ = lambda self, other: sub(other, self)
Var.__mul__ = lambda self, other: mul(self, other)
Var.__rmul__ = lambda self, other: mul(other, self)
Var.__truediv__ = lambda self, other: div(self, other)
Var.__rtruediv__ = lambda self, other: div(other, self)
Var.__matmul__ = lambda self, other: matmul(self, other)
Var.__rmatmul__ = lambda self, other: matmul(other, self)
Var.__neg__ = lambda self: neg(self)
Var.__getitem__ = lambda self, key: getitem(self, key)

# Comparisons are not differentiable: they give plain boolean arrays (for where).
_raw = lambda v: v.value if type(v) is Var else v
Var.__lt__ = lambda self, other: self.value < _raw(other)
Var.__le__ = lambda self, other: self.value <= _raw(other)
Var.__gt__ = lambda self, other: self.value > _raw(other)
Var.__ge__ = lambda self, other: self.value >= _raw(other)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    # NumPy calls this for `ndarray + Var` and for np.exp(Var): the arithmetic maps to
    # the traced ops; anything else would silently drop the gradient, so it refuses.
    op = _UFUNC_OPS.get(ufunc.__name__)
    if op is not None and method == "__call__" and not kwargs:
        return op(*inputs)
    raise TypeError(
        f"numpy.{ufunc.__name__} got a traced value: use harness.engine.ops instead of "
        "NumPy functions inside a differentiated function"
    )


_UFUNC_OPS = {"add": add, "subtract": sub, "multiply": mul, "divide": div, "true_divide": div,
              "matmul": matmul, "negative": neg}  # fmt: skip
Var.__array_ufunc__ = _array_ufunc
