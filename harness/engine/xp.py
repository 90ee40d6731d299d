"""The array module: NumPy, or CuPy when the arrays live on a GPU.

Every op picks its module from its inputs (``xp = array_module(x, y)``), so the same
code runs on both. CuPy is imported only when a CuPy array is seen: it is never
required, and importing it costs nothing on a CPU-only run.
"""

import numpy as np


_is_cupy_type = {}


def is_cupy(value):
    # Checked by module name, so that we never import cupy to find out; cached by
    # type, since every op asks.
    kind = type(value)
    found = _is_cupy_type.get(kind)
    if found is None:
        found = _is_cupy_type[kind] = kind.__module__.partition(".")[0] == "cupy"
    return found


_is_array_type = {np.ndarray: True}


def is_array(value):
    # Every op asks, of operands, bases and results alike: answered per type, once.
    kind = type(value)
    found = _is_array_type.get(kind)
    if found is None:
        found = _is_array_type[kind] = issubclass(kind, np.ndarray) or is_cupy(value)
    return found


def array_module(*values):
    """cupy if any value is a cupy array, else numpy."""
    for value in values:
        if is_cupy(value):
            import cupy

            return cupy
    return np


def owner(array):
    """The array that owns `array`'s memory (`array` itself unless it is a view)."""
    base = array.base
    while base is not None and is_array(base):
        array, base = base, base.base
    return array


def buffer_address(array):
    """Address of the start of the buffer `array` views: one key per buffer, shared by
    all its views (NumPy's __array_interface__, CuPy's device pointer)."""
    base = owner(array)
    if is_cupy(base):
        return base.data.ptr
    return base.__array_interface__["data"][0]


def is_exclusive_view(array):
    """True if writing into `array` in place is safe as far as its own layout goes:
    writeable and not a broadcast (a zero stride on a dimension longer than 1 would
    make one element stand for many)."""
    flags = getattr(array, "flags", None)
    if flags is not None and not getattr(flags, "writeable", True):
        return False
    if flags is not None and flags.c_contiguous:  # (most cotangents) no stride is 0
        return True
    return all(stride or n <= 1 for stride, n in zip(array.strides, array.shape))


def scatter_add(target, index, values):
    """target[index] += values, adding repeated indices as many times as they occur."""
    if is_cupy(target):
        import cupyx

        cupyx.scatter_add(target, index, values)
    else:
        np.add.at(target, index, values)


#: the name of a Fused kernel's output parameter in its CUDA source
OUTPUT = "fused_out"


class Fused:
    """An elementwise chain that is one kernel launch on CuPy and NumPy's in-place
    sequence on the CPU.

    On a GPU every NumPy-style op is a launch of its own (tanh's VJP ``t = out * out;
    t = 1 - t; t *= g`` is three, plus a temporary each): the step's time is mostly
    launches. `expr` is the chain as one expression over `names`, in the syntax C and
    Python share (``*``, ``+``, ``-``, ``/``, comparisons, ``exp``/``tanh``/``sin``/
    ``cos``/``log``), compiled once per process into a ``cupy.ElementwiseKernel``
    (float32 or float64 alike; broadcasting as NumPy's). On NumPy arrays `numpy` runs
    instead, ``numpy(*arrays, out=None)``, written to make at most one array; the tests
    evaluate `expr` with NumPy's functions against it, so the kernel's text is checked
    on machines without a GPU.
    """

    def __init__(self, name, names, expr, numpy):
        self.name, self.names, self.expr, self.numpy = name, names, expr, numpy
        self._kernel = None

    def __call__(self, *arrays, out=None):
        if not is_cupy(arrays[0]):
            return self.numpy(*arrays, out=out)
        if self._kernel is None:
            import cupy

            params = ", ".join(f"T {n}" for n in self.names)
            # the output's name must differ from every input's (div's VJP reads an input "y")
            self._kernel = cupy.ElementwiseKernel(params, f"T {OUTPUT}", f"{OUTPUT} = {self.expr};",
                                                  f"gradmem_{self.name}")
        return self._kernel(*arrays) if out is None else self._kernel(*arrays, out)

    def reference(self, *arrays):
        """`expr` evaluated with NumPy (the kernel's arithmetic, for the tests)."""
        scope = {n: getattr(np, n) for n in ("exp", "tanh", "sin", "cos", "log", "sqrt")}
        scope.update(zip(self.names, arrays))
        return eval(self.expr, {"__builtins__": {}}, scope)  # the expression is ours, not input
