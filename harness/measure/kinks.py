"""The truth at a relu's kink: which side of it a float32 run may take.

relu's derivative jumps at 0. A pre-activation within float32 rounding of zero can
land on either side in a float32 run, depending on how that framework orders its sums,
while the float64 reference takes the side float64 puts it on. transformer_block small
has one such unit among the MLP's 1,048,576 (2.9e-09 in float64): eight frameworks'
float32 runs put it on the other side and their w1 gradient reads 7.6e-04 from the
float64 truth, torch's happens not to and reads 5.6e-07 (on an Intel Xeon; on an AMD EPYC
the NumPy engine's float32 keeps float64's side too: the CPU's BLAS kernels order the
sums). Nothing is wrong with either.

So the reference engine computes the truth twice where a kink is near: once as float64
has it, and once with the relu units within rounding of zero (`near_zero`) on their
other side (`KinkOps`, the op set with relu's side chosen per unit). A gradient that
matches either is correct; the comparison names the kink (`Kink.units`) and which side
the run took. A gradient wrong for another reason (a VJP off by 1e-3) matches neither.
"""

from typing import NamedTuple

import numpy as np

#: a relu input whose magnitude is at most this fraction of its tensor's largest is
#: within float32 rounding of zero: one float32 ulp of the largest input, the size a
#: float32 sum's rounding error reaches. transformer_block small's flipped unit reads
#: -2.6e-09 against a largest input of 5.24 (2**-31 of it); the next six nearest read
#: 1.2e-06 to 4.5e-06 (2**-22 to 2**-20), and flipping any of them alone moves every
#: float32 run further from the truth, not nearer (tests/measure/test_kinks.py)
NEAR_ZERO = 2.0 ** -24
#: near-zero units beyond this many are flipped all together only (one pass each otherwise)
MAX_ALONE = 8


def near_zero(value):
    """The units of a relu's input `value` (NumPy) within float32 rounding of zero."""
    value = np.asarray(value)
    if value.size == 0:
        return np.zeros(value.shape, bool)
    scale = float(np.max(np.abs(value)))
    return np.abs(value) <= NEAR_ZERO * scale if scale > 0 else np.zeros(value.shape, bool)


class KinkOps:
    """An op table (the reference engine's) whose relu notes each call's units within
    rounding of zero (`found`, one mask per call in call order) or, given `flip` (such
    masks), puts those units on the other side of the kink: value and derivative of
    the other side, every other unit as relu has it."""

    def __init__(self, ops, flip=None):
        self._ops, self._flip, self._calls = ops, flip, 0
        self.found = []

    def __getattr__(self, name):
        return getattr(self._ops, name)

    def relu(self, x):
        value = np.asarray(getattr(x, "value", x))
        if self._flip is None:
            self.found.append(near_zero(value))
            return self._ops.relu(x)
        flip = self._flip[self._calls]
        self._calls += 1
        if not flip.any():
            return self._ops.relu(x)
        side = (value > 0) ^ flip  # where the unit passes its input on
        return self._ops.where(side, x, np.zeros_like(value))


class Kink(NamedTuple):
    units: int  # relu units within rounding of zero
    candidates: list  # [(which units flipped, in words; gradient with them on their other side)]


def reference_with_kink(adapter, loss_fn, params, inputs):
    """(loss, grads, Kink or None): the reference engine's gradient of `loss_fn`
    (ops, params, inputs) -> scalar at (params, inputs), and, where relu inputs lie
    within rounding of zero, the gradients with them on their other side: each alone
    (up to MAX_ALONE of them) and all together."""
    recorder = {}

    def recording(ops, p, i):
        recorder["ops"] = KinkOps(ops)
        return loss_fn(recorder["ops"], p, i)

    loss, grads = adapter.value_and_grad(recording, "eager")(params, inputs)
    found = recorder["ops"].found
    units = [(call, tuple(int(i) for i in index)) for call, mask in enumerate(found) for index in np.argwhere(mask)]
    if not units:
        return loss, grads, None

    def flipped(chosen):
        flip = [np.zeros_like(mask) for mask in found]
        for call, index in chosen:
            flip[call][index] = True
        _, other = adapter.value_and_grad(lambda ops, p, i: loss_fn(KinkOps(ops, flip=flip), p, i), "eager")(
            params, inputs)
        return other

    sets = [[unit] for unit in units] if 1 < len(units) <= MAX_ALONE else []
    sets.append(units)
    candidates = [(_name(chosen, len(units)), flipped(chosen)) for chosen in sets]
    return loss, grads, Kink(len(units), candidates)


def _name(chosen, total):
    if len(chosen) == total:
        return f"all {total} near-zero unit(s) flipped" if total > 1 else "the near-zero unit flipped"
    call, index = chosen[0]
    return f"unit {index} of relu call {call} flipped"


def describe(units, flipped):
    """The words for a gradient that matched the truth with `flipped` units on the other
    side of relu's kink."""
    return (f"relu kink: {units} unit(s) within float32 rounding of zero; this run put {flipped.split(' flipped')[0]} "
            f"on the other side of it than float64 does, and agrees with the truth taken there")


# ---- the truth on disk: one layout for `harness check` and the memory pass's cross-check ----
def save_truth(handle, loss, grads, kink):
    """Write the truth (float64 NumPy) to `handle` as .npz: ``loss``, ``grad/<param>``,
    and for a kink ``kink_units`` and each candidate's ``kink<i>/name`` and
    ``kink<i>/grad/<param>``."""
    arrays = {"loss": np.asarray(loss), **{f"grad/{k}": np.asarray(v) for k, v in grads.items()}}
    if kink is not None:
        arrays["kink_units"] = np.asarray(kink.units)
        for i, (name, other) in enumerate(kink.candidates):
            arrays[f"kink{i}/name"] = np.asarray(name)
            arrays.update({f"kink{i}/grad/{k}": np.asarray(v) for k, v in other.items()})
    np.savez(handle, **arrays)


class Truth(NamedTuple):
    loss: object
    grads: dict
    units: int  # relu units within rounding of zero (0: no kink)
    candidates: list  # [(name, grads)]: the truth with near-zero units flipped


def load_truth(path):
    with np.load(path) as arrays:
        files = arrays.files
        grads = {k[len("grad/"):]: arrays[k] for k in files if k.startswith("grad/")}
        candidates, i = [], 0
        while f"kink{i}/name" in files:
            prefix = f"kink{i}/grad/"
            candidates.append((str(arrays[f"kink{i}/name"]),
                               {k[len(prefix):]: arrays[k] for k in files if k.startswith(prefix)}))
            i += 1
        units = int(arrays["kink_units"]) if "kink_units" in files else 0
        return Truth(arrays["loss"] if "loss" in files else None, grads, units, candidates)
