"""The op set: the contract every framework adapter implements.

A workload is written once, as ``loss(ops, params, inputs)``, and calls only the
functions named here: ``ops.matmul(a, b)``, never ``torch.matmul``. Each adapter
provides a namespace with exactly these names and maps each one to its framework's
*native* function (``torch.nn.functional.conv2d``, ``jax.lax.conv_general_dilated``,
``tf.nn.conv2d``, ...), so every framework builds its own graph of its own ops, which
is what its memory behaviour depends on. Where a framework lacks an op (HIPS autograd
has no conv2d) its adapter builds it from that framework's primitives and says so.

Names follow the Python array API standard where it has one. Conventions:

- arrays are the framework's own type; a binary elementwise op also accepts a Python
  ``float``/``int`` on either side, which never changes the dtype (float32 stays
  float32);
- broadcasting is NumPy's;
- ``axis`` is an ``int``, a ``tuple`` of ints, or ``None`` (all axes);
- images are NCHW, conv weights OIHW (out, in, kernel h, kernel w), as in PyTorch;
- integer index arrays (``take``) and boolean masks (``where``) come from the
  workload's ``inputs`` and are never differentiated.

``checkpoint`` and ``chain`` take functions: they mark the segments a remat strategy
may recompute in the backward pass (``load(..., remat=...)``; see
harness/remat_strategies.py). Without remat they are the plain call and the plain loop.

``OPS`` lists every name; ``missing_ops(namespace)`` is what the adapter tests use to
check that a namespace implements the whole contract.
"""

# name -> (signature, semantics). The single source of truth for the op set: the
# adapter tests iterate over it, and docs/ops.md's table is generated from it
# (contract_table(); tests/test_contract.py fails when the page is out of date).
OPS = {
    # elementwise, broadcasting
    "add": ("add(x, y)", "x + y"),
    "sub": ("sub(x, y)", "x - y"),
    "mul": ("mul(x, y)", "x * y"),
    "div": ("div(x, y)", "x / y"),
    "neg": ("neg(x)", "-x"),
    "exp": ("exp(x)", "e**x"),
    "log": ("log(x)", "natural logarithm"),
    "sqrt": ("sqrt(x)", "square root (optimizer steps)"),
    "tanh": ("tanh(x)", "hyperbolic tangent"),
    "sigmoid": ("sigmoid(x)", "1 / (1 + exp(-x))"),
    "relu": ("relu(x)", "max(x, 0); gradient 0 at 0"),
    "sin": ("sin(x)", "sine"),
    "cos": ("cos(x)", "cosine"),
    # linear algebra
    "matmul": ("matmul(a, b)", "a @ b; 2-D or batched (..., m, k) @ (..., k, n)"),
    # reductions
    "sum": ("sum(x, axis=None, keepdims=False)", "sum over axis"),
    "mean": ("mean(x, axis=None, keepdims=False)", "mean over axis"),
    "max": ("max(x, axis=None, keepdims=False)", "maximum over axis"),
    # shape
    "reshape": ("reshape(x, shape)", "same data, new shape (tuple, may hold one -1)"),
    "permute_dims": ("permute_dims(x, axes)", "transpose by the permutation axes"),
    "concat": ("concat(xs, axis=0)", "join a sequence of arrays along an existing axis"),
    "stack": ("stack(xs, axis=0)", "join a sequence of arrays along a new axis"),
    "getitem": ("getitem(x, key)", "basic indexing x[key]: ints, slices, Ellipsis, None"),
    # indexing
    "take": ("take(x, indices, axis=0)", "gather along axis by an integer array"),
    "where": ("where(cond, x, y)", "x where the boolean cond holds, else y"),
    # neural-network ops
    "softmax": ("softmax(x, axis=-1)", "exp(x) / sum(exp(x), axis), computed stably"),
    "logsumexp": ("logsumexp(x, axis=-1, keepdims=False)", "log(sum(exp(x), axis)), stably"),
    "conv2d": (
        "conv2d(x, w, stride=1, padding=0)",
        "2-D cross-correlation, x NCHW, w OIHW, no bias (torch.nn.functional.conv2d)",
    ),
    "max_pool2d": ("max_pool2d(x, size=2)", "max over size x size windows, stride size; NCHW"),
    "upsample2d": ("upsample2d(x, scale=2)", "nearest-neighbour upsampling of H and W; NCHW"),
    "cumsum": ("cumsum(x, axis)", "inclusive cumulative sum along axis"),
    # segments a remat strategy may recompute (harness/remat_strategies.py); with remat
    # "none" they are the plain call and the plain loop
    "checkpoint": (
        "checkpoint(f, *xs)",
        "f(*xs), one segment; f is pure in xs (arrays or flat dicts of arrays, no arrays "
        "from a closure), so a remat may keep only xs and recompute f's insides",
    ),
    "chain": (
        "chain(step, x, n, consts)",
        "x_n where x_{i+1} = step(i, x_i, consts) for i in range(n); consts a flat dict of "
        "arrays, i a Python int; a remat may keep only some x_i and recompute the rest",
    ),
}


def missing_ops(namespace):
    """The contract's op names that `namespace` lacks (empty when it is complete)."""
    return sorted(name for name in OPS if not callable(getattr(namespace, name, None)))


def contract_table():
    """The op set as Markdown rows, for the docs."""
    rows = ["| op | semantics |", "|---|---|"]
    rows += [f"| `{sig}` | {meaning} |" for sig, meaning in OPS.values()]
    return "\n".join(rows)
