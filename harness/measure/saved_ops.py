"""Which op made each saved activation: the record's ``saved_by_op``.

One unmeasured forward pass after every measured figure (like the breakdown's), under
the adapter's `saving()` hooks; the adapter lists the buffers the forward keeps for
the backward and the op that made each (`Adapter.saved_by_op`: the reference
engine's ledger tag, the producing node of torch's and Paddle's autograd graph, the
source primitive of JAX's VJP residuals). Here they are counted once per buffer,
named by the op set's names where one corresponds (harness/ops.py, so that two
frameworks' lists line up; the framework's own names are kept beside) and summed.
The same pass's saved-activations figure (the breakdown's method) is kept beside
the sum, so a reader sees how much of it the op list explains.

Where the adapter sees no op (TensorFlow, autograd, tinygrad, MLX, PyTensor, compiled
Paddle) the record's value holds ``ops: null`` and the reason. A step that is one call
(no forward/backward split) has no end of forward to look at.

The reference engine also reports, for the backward of that forward, what is live
at its highest point and what it allocates, by what made each buffer (`backward`:
gradient accumulation, cotangents, saved activations; exact ledger bytes). That is
the split a regression inside its backward shows up in.
"""

import re

from harness.measure.breakdown import NO_SPLIT
from harness.ops import OPS

#: framework op names (lower case, after `_plain_name`) -> the op set's name, where
#: they compute the same thing; anything else keeps its own name
ALIASES = {
    # torch autograd nodes (MmBackward0 -> "mm") and aten names
    "mm": "matmul", "bmm": "matmul", "addmm": "matmul", "baddbmm": "matmul", "dot": "matmul",
    "mv": "matmul", "unsafeview": "reshape", "view": "reshape", "t": "permute_dims",
    "transpose": "permute_dims", "permute": "permute_dims", "cat": "concat", "select": "getitem",
    "slice": "getitem", "index": "getitem", "indexselect": "take", "embedding": "take",
    "convolution": "conv2d", "mkldnnconvolution": "conv2d", "maxpool2dwithindices": "max_pool2d",
    "upsamplenearest2d": "upsample2d", "scale": "mul", "logsoftmax": "softmax", "amax": "max", "rsub": "sub",
    "sigmoid": "sigmoid",
    # Paddle grad nodes (MatmulGradNode -> "matmul") and ops
    "elementwiseadd": "add", "elementwisesub": "sub", "elementwisemul": "mul",
    "multiply": "mul", "subtract": "sub", "divide": "div", "conv2dgrad": "conv2d", "pool2d": "max_pool2d",
    "transpose2": "permute_dims", "reshape2": "reshape", "concatenate": "concat", "gather": "take",
    "nearestinterp": "upsample2d", "nearestinterpv2": "upsample2d", "meanall": "mean", "maxpool2d": "max_pool2d",
    "reducesum": "sum", "reducemean": "mean", "reducemax": "max",
    # JAX primitives
    "dotgeneral": "matmul", "convgeneraldilated": "conv2d", "reducemaxp": "max", "reducesump": "sum",
    "logistic": "sigmoid", "dynamicslice": "getitem",
    "concatenatep": "concat", "reducewindowmax": "max_pool2d", "cumlogsumexp": "logsumexp",
    "squeeze": "reshape", "expanddims": "reshape",
}


def _plain_name(name):
    """'MmBackward0' -> 'mm', 'MatmulGradNode' -> 'matmul', 'dot_general' -> 'dotgeneral'."""
    name = re.sub(r"(Backward\d*|GradNode|_grad)$", "", name)
    return re.sub(r"[^a-z0-9]", "", name.lower())


def op_name(framework_name):
    """The op set's name for a framework's op name, or None where none corresponds."""
    plain = _plain_name(framework_name)
    if plain in OPS:
        return plain
    return ALIASES.get(plain) if ALIASES.get(plain) in OPS else None


def group(entries):
    """{op: {bytes, count, names[, read_by]}} from [(buffer key, bytes, framework op name
    [, names of the nodes that read it])], each buffer counted once (its first entry),
    biggest first. An op with no counterpart in the op set is keyed by its own name and
    marked ``in_op_set: false``."""
    seen, ops = set(), {}
    for key, nbytes, name, *read_by in entries:
        if key in seen:
            continue
        seen.add(key)
        mapped = op_name(name)
        row = ops.setdefault(mapped or name, {"bytes": 0, "count": 0, "names": [], "in_op_set": mapped is not None})
        row["bytes"] += int(nbytes)
        row["count"] += 1
        if name not in row["names"]:
            row["names"].append(name)
        if read_by:
            row["read_by"] = sorted(set(row.get("read_by", [])) | set(read_by[0]))
    return dict(sorted(ops.items(), key=lambda item: (-item[1]["bytes"], item[0])))


def measure(adapter, step):
    """The record's ``saved_by_op``: {ops (or null), bytes (their sum), method (or the
    reason ops is null), saved_activations_bytes (the adapter's figure in the same
    pass), backward (reference engine; else null)}."""
    found = {"ops": None, "bytes": None, "method": NO_SPLIT, "saved_activations_bytes": None, "backward": None}
    if step.kind != "split":
        return found
    with adapter.saving():
        state = step.forward(step.params, step.inputs)
        adapter.sync(state)
    # A diagnostic must never cost the cell its figures: a hook that fails (a framework
    # version without the API used) leaves its part null with the error as the reason.
    try:
        entries, found["method"] = adapter.saved_by_op(state, step.params, step.inputs)
    except Exception as err:  # noqa: BLE001
        entries, found["method"] = None, f"the {adapter.name} adapter's saved_by_op failed: {_error(err)}"
    if not adapter.saved_activations_from_rss:
        found["saved_activations_bytes"] = adapter.saved_activation_bytes(state, step.params, step.inputs)[0]
    if entries is not None:
        found["ops"] = group(entries)
        found["bytes"] = sum(row["bytes"] for row in found["ops"].values())
    try:
        found["backward"] = adapter.backward_detail(lambda: step.backward(state))
    except Exception as err:  # noqa: BLE001
        found["backward"] = {"error": f"the {adapter.name} adapter's backward_detail failed: {_error(err)}"}
    return found


def _error(err):
    return f"{type(err).__name__}: {str(err)[:300]}"
