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


def is_array(value):
    return type(value) is np.ndarray or isinstance(value, np.ndarray) or is_cupy(value)


def array_module(*values):
    """cupy if any value is a cupy array, else numpy."""
    for value in values:
        if is_cupy(value):
            import cupy

            return cupy
    return np


def owner(array):
    """The array that owns `array`'s memory (`array` itself unless it is a view)."""
    while is_array(array.base):
        array = array.base
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
    return all(stride or n <= 1 for stride, n in zip(array.strides, array.shape))


def scatter_add(target, index, values):
    """target[index] += values, adding repeated indices as many times as they occur."""
    if is_cupy(target):
        import cupyx

        cupyx.scatter_add(target, index, values)
    else:
        np.add.at(target, index, values)
