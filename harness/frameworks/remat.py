"""Rematerialisation in the adapters: the plain ops, a native checkpoint made into a
chain, and the flattening native APIs need.

A workload marks its segments once, with two ops of the op set (harness/ops.py):

- ``checkpoint(f, *xs)`` -> ``f(*xs)``: one segment, ``f`` pure in ``xs``;
- ``chain(step, x, n, consts)`` -> ``x_n`` with ``x_{i+1} = step(i, x_i, consts)``.

With remat "none" they are the plain call and the plain loop defined here. A native
strategy wraps each segment in the framework's checkpoint API; `segmented_chain` cuts
a chain into the ceil(sqrt(n)) segments of `sqrt_segments` (what torch's
checkpoint_sequential does) so an adapter only supplies its `wrap`; `chain_of` builds
that chain from the adapter's native ``checkpoint``. Native APIs that see only
top-level array arguments (torch reentrant, tf.recompute_grad, autograd.checkpoint)
get the arrays of a dict argument as separate arguments from `flat_checkpoint`.

The strategy names, --remat's parser and the segmentation are harness/remat_strategies.py's,
which the reference engine reads too; they are named here as well, where the adapters
(``remat_lib.parse_remat``) and their tests read them.
"""

import functools

from harness.remat_strategies import (  # noqa: F401
    SPELLINGS, STRATEGIES, flatten, format_remat, parse_remat, run_steps, segmented_chain, sqrt_segments,
)  # fmt: skip


def offers(remats, text):
    """Whether an adapter offering `remats` runs `text` ("revolve:S" in remats offers
    every revolve:S); ChoiceError when `text` is malformed."""
    strategy, arg = parse_remat(text)
    return (strategy == "revolve" and "revolve:S" in remats) or format_remat(strategy, arg) in remats


# ---- remat "none": the plain ops every namespace gets ------------------------------
def checkpoint(f, *xs):
    """One segment with no remat: just the call."""
    return f(*xs)


def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts), with no remat: the Python loop."""
    for i in range(n):
        x = step(i, x, consts)
    return x


def chain_of(checkpoint):
    """The native ``chain``: each sqrt segment of the chain is one ``checkpoint(seg, x,
    consts)`` of the adapter's native checkpoint."""

    def native_chain(step, x, n, consts):
        return segmented_chain(step, x, n, consts, lambda seg: functools.partial(checkpoint, seg))

    return native_chain


def flat_checkpoint(native):
    """``checkpoint(f, *xs)`` on a native ``native(g, *arrays) -> g(*arrays)`` that
    tracks only top-level array arguments (an array inside a dict would be invisible
    to it: no gradient, or a gradient left on the leaf)."""

    def checkpoint(f, *xs):
        leaves, rebuild = flatten(xs)
        return native(lambda *flat: f(*rebuild(flat)), *leaves)

    return checkpoint
