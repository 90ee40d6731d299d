"""The remat strategies every engine shares: their names and --remat's parser, the
sqrt segmentation of a chain, the loop that runs a chain's steps, and the flattening
of a segment's arguments.

A workload marks its segments once, with two ops of the op set (harness/ops.py):
``checkpoint(f, *xs)``, one segment, and ``chain(step, x, n, consts)``, n steps
``x_{i+1} = step(i, x_i, consts)``. The reference engine (harness/engine/remat.py) and
the adapters (harness/frameworks/remat.py) both read the strategy from here, so it
imports nothing above harness/choices.py: the engine must not import the frameworks.

The remat string (``--remat``) is parsed by `parse_remat` into ``(strategy, arg)``:
``"none"`` -> ("none", None), ``"native:reentrant"`` -> ("native", "reentrant"),
``"revolve:4"`` -> ("revolve", 4).
"""

import math

from harness.choices import ChoiceError

#: every strategy name, whatever adapter offers it (see the remat contract)
STRATEGIES = ("none", "native", "sqrt", "revolve", "articulation")
#: how each is spelled, for error messages
SPELLINGS = ("none", "native", "native:<variant>", "sqrt", "revolve:S", "articulation")


def parse_remat(text):
    """``text`` -> (strategy, arg); ChoiceError naming the valid spellings otherwise.

    arg is None, the variant name of "native:<variant>", or the snapshot count S >= 1
    of "revolve:S".
    """
    valid = ", ".join(SPELLINGS)
    if not isinstance(text, str) or not text.strip():
        raise ChoiceError(f"unknown remat {text!r}; valid remats: {valid}")
    strategy, sep, arg = text.strip().partition(":")
    if strategy not in STRATEGIES:
        raise ChoiceError(f"unknown remat {text!r}; valid remats: {valid}")
    if strategy == "native":
        if not sep:
            return "native", None
        if not arg.isidentifier():
            raise ChoiceError(f"remat {text!r}: native variant must be a name, as in "
                              f"native:reentrant; valid remats: {valid}")
        return "native", arg
    if strategy == "revolve":
        if not (sep and arg.isdigit() and int(arg) >= 1):
            raise ChoiceError(f"remat {text!r}: revolve needs a snapshot count S >= 1, "
                              f"as in revolve:4; valid remats: {valid}")
        return "revolve", int(arg)
    if sep:
        raise ChoiceError(f"remat {text!r}: {strategy} takes no argument; valid remats: {valid}")
    return strategy, None


def format_remat(strategy, arg=None):
    """The inverse of parse_remat: ("native", "reentrant") -> "native:reentrant"."""
    return strategy if arg is None else f"{strategy}:{arg}"


def sqrt_segments(n):
    """ceil(sqrt(n)) consecutive (start, stop) ranges covering range(n), as even as can be.

    Chen et al. 2016: storing only the segment boundaries and recomputing one segment at
    a time keeps O(sqrt(n)) activations. The first n % k segments get one extra step.
    """
    if n < 0:
        raise ValueError(f"sqrt_segments needs n >= 0, got {n}")
    if n == 0:
        return []
    k = math.isqrt(n - 1) + 1  # ceil(sqrt(n)) without float rounding
    base, extra = divmod(n, k)
    segments, start = [], 0
    for j in range(k):
        stop = start + base + (1 if j < extra else 0)
        segments.append((start, stop))
        start = stop
    return segments


def run_steps(step, x, start, stop, consts):
    """Steps start..stop-1 of a chain (the body of one segment)."""
    for i in range(start, stop):
        x = step(i, x, consts)
    return x


def segmented_chain(step, x, n, consts, wrap):
    """A chain cut into sqrt_segments(n), each run as ``wrap(segment_fn)(x, consts)``.

    ``segment_fn(x, consts)`` runs its steps; ``wrap`` is the framework's checkpoint
    (e.g. ``jax.checkpoint``), so only each segment's input x is kept and its insides
    are recomputed in the backward pass.
    """
    for start, stop in sqrt_segments(n):
        x = wrap(_segment(step, start, stop))(x, consts)
    return x


def _segment(step, start, stop):
    # A named closure per segment (not a lambda in a loop: start/stop are bound here).
    def segment_fn(x, consts):
        return run_steps(step, x, start, stop, consts)

    segment_fn.__name__ = f"chain_segment_{start}_{stop}"
    return segment_fn


def flatten(xs):
    """Arguments (arrays or flat dicts of arrays) -> (leaves, rebuild), where
    ``rebuild(leaves)`` gives the arguments back (dicts in their key order)."""
    leaves, layout = [], []
    for x in xs:
        if isinstance(x, dict):
            layout.append(tuple(x))
            leaves.extend(x.values())
        else:
            layout.append(None)
            leaves.append(x)

    def rebuild(flat):
        out, k = [], 0
        for keys in layout:
            if keys is None:
                out.append(flat[k])
                k += 1
            else:
                out.append(dict(zip(keys, flat[k : k + len(keys)])))
                k += len(keys)
        return tuple(out)

    return leaves, rebuild
