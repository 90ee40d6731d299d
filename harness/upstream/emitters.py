"""The op set written as plain framework code: one emitter per op and framework.

A workload calls ``ops.tanh(ops.add(ops.matmul(h, W), b))``; a maintainer reads
``torch.tanh(h @ W + b)``. Each emitter takes the call's arguments as source text
(bound to the op's parameters by its signature in harness/ops.py, defaults filled in)
and returns the framework's expression: the same native function the adapter's op
table calls (harness/frameworks/<name>.py, `_make_ops`), so the standalone script runs
the framework's own ops, as the harness does. Where the adapter's op is more than one
call (TensorFlow's NCHW conv through NHWC, JAX's max pool as a reduce_window), the
expression calls a helper function whose source goes into the script once
(`HELPERS`): the adapter's own few lines, written out.

``checkpoint`` and ``chain`` are the segments a remat strategy may recompute; the
scripts reproduce the sweep's cells, which ran without remat, so a checkpoint is the
plain call and a chain the plain loop (harness/frameworks/remat.py).
"""

import ast
from types import SimpleNamespace

#: the frameworks a standalone script can be written for
FRAMEWORKS = ("torch", "jax", "tensorflow")


class NotEmitted(ValueError):
    """An op call no emitter writes (e.g. an axis of None where the framework needs the
    axes listed): the message names the op and why."""


def _kw(name, value, default):
    """', name=value', or '' where `value` is the parameter's default (left out, as
    users write the call)."""
    return "" if value == default else f", {name}={value}"


def _axis_list(axis):
    """TensorFlow's reductions take a list of axes, not a tuple (the adapter's _axes)."""
    try:
        found = ast.literal_eval(axis)
    except (ValueError, SyntaxError):
        return axis
    return repr(list(found)) if isinstance(found, tuple) else axis


def _simple(text):
    """True when `text` is a name or a literal: safe to write twice in one expression."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.Name, ast.Constant)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


def _binary(symbol):
    return lambda a: f"({a.x}) {symbol} ({a.y})"


def _unary(call):
    return lambda a: f"{call}({a.x})"


def _reduction(call, axis_name, keep_name, all_axes="", tf_axes=False, every_axis=""):
    """A reduction's emitter. Its `general` form writes the body of a function whose axis
    is a parameter, known only at run time: None there means every axis (`every_axis`,
    where the framework's call needs them listed, as the adapter's does)."""
    def emit(a):
        if a.axis == "None" and not all_axes:
            return f"{call}({a.x}" + _kw(keep_name, a.keepdims, "False") + ")"
        axis = _axis_list(a.axis) if tf_axes else a.axis
        if a.axis == "None":
            if not _simple(a.x):
                raise NotEmitted(f"{call} over every axis of an expression: give the axes")
            axis = all_axes.format(x=a.x)
        return f"{call}({a.x}, {axis_name}={axis}" + _kw(keep_name, a.keepdims, "False") + ")"

    def general(a):
        axis = a.axis
        if tf_axes:
            axis = f"list({a.axis}) if isinstance({a.axis}, tuple) else {a.axis}"
        elif all_axes or every_axis:
            axis = f"{(all_axes or every_axis).format(x=a.x)} if {a.axis} is None else {a.axis}"
        return f"{call}({a.x}, {axis_name}={axis}, {keep_name}={a.keepdims})"

    emit.general = general
    return emit


def _common(prefix_unary, matmul="@"):
    """The emitters the three frameworks write alike: Python's operators (each a
    framework op: torch.add, jnp.add, tf.math.add; a Python number keeps the array's
    dtype), and indexing."""
    return {
        "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"), "div": _binary("/"),
        "neg": lambda a: f"-({a.x})",
        "matmul": lambda a: f"({a.a}) {matmul} ({a.b})",
        "getitem": lambda a: f"({a.x})[{a.key}]",
        **{name: _unary(f"{prefix_unary}{name}") for name in ("exp", "log", "sqrt", "tanh", "sin", "cos")},
    }


#: torch's reductions over every axis, as the adapter's `_all_axes` lists them
EVERY_AXIS = "tuple(range({x}.ndim))"

TORCH = {
    **_common("torch."),
    "sigmoid": _unary("torch.sigmoid"),
    "relu": _unary("torch.relu"),
    "sum": _reduction("torch.sum", "dim", "keepdim", every_axis=EVERY_AXIS),
    "mean": _reduction("torch.mean", "dim", "keepdim", every_axis=EVERY_AXIS),
    # amax, not max(dim): the gradient is shared among ties (the adapter's choice)
    "max": _reduction("torch.amax", "dim", "keepdim", every_axis=EVERY_AXIS),
    "reshape": lambda a: f"torch.reshape({a.x}, {a.shape})",
    "permute_dims": lambda a: f"torch.permute({a.x}, {a.axes})",
    "concat": lambda a: f"torch.cat({a.xs}" + _kw("dim", a.axis, "0") + ")",
    "stack": lambda a: f"torch.stack({a.xs}" + _kw("dim", a.axis, "0") + ")",
    "take": lambda a: f"take({a.x}, {a.indices}" + _kw("axis", a.axis, "0") + ")",
    "where": lambda a: f"torch.where({a.cond}, {a.x}, {a.y})",
    "softmax": lambda a: f"torch.softmax({a.x}, dim={a.axis})",
    "logsumexp": _reduction("torch.logsumexp", "dim", "keepdim", all_axes=EVERY_AXIS),
    "conv2d": lambda a: f"F.conv2d({a.x}, {a.w}" + _kw("stride", a.stride, "1") + _kw("padding", a.padding, "0") + ")",
    "max_pool2d": lambda a: (f"F.max_pool2d({a.x}, kernel_size={a.size}, stride={a.size})" if _simple(a.size)
                             else f"max_pool2d({a.x}, {a.size})"),
    "upsample2d": lambda a: f'F.interpolate({a.x}, scale_factor={a.scale}, mode="nearest")',
    "cumsum": lambda a: f"torch.cumsum({a.x}, dim={a.axis})",
}

JAX = {
    **_common("jnp."),
    "sigmoid": _unary("jax.nn.sigmoid"),
    "relu": _unary("jax.nn.relu"),
    "sum": _reduction("jnp.sum", "axis", "keepdims"),
    "mean": _reduction("jnp.mean", "axis", "keepdims"),
    "max": _reduction("jnp.max", "axis", "keepdims"),
    "reshape": lambda a: f"jnp.reshape({a.x}, {a.shape})",
    "permute_dims": lambda a: f"jnp.transpose({a.x}, {a.axes})",
    "concat": lambda a: f"jnp.concatenate({a.xs}" + _kw("axis", a.axis, "0") + ")",
    "stack": lambda a: f"jnp.stack({a.xs}" + _kw("axis", a.axis, "0") + ")",
    "take": lambda a: f"jnp.take({a.x}, {a.indices}, axis={a.axis})",
    "where": lambda a: f"jnp.where({a.cond}, {a.x}, {a.y})",
    "softmax": lambda a: f"jax.nn.softmax({a.x}, axis={a.axis})",
    "logsumexp": _reduction("jax.nn.logsumexp", "axis", "keepdims"),
    "conv2d": lambda a: f"conv2d({a.x}, {a.w}" + _kw("stride", a.stride, "1") + _kw("padding", a.padding, "0") + ")",
    "max_pool2d": lambda a: f"max_pool2d({a.x}, {a.size})",
    "upsample2d": lambda a: f"upsample2d({a.x}, {a.scale})",
    "cumsum": lambda a: f"jnp.cumsum({a.x}, axis={a.axis})",
}

TENSORFLOW = {
    **_common("tf.math."),
    "sigmoid": _unary("tf.math.sigmoid"),
    "relu": _unary("tf.nn.relu"),
    "sum": _reduction("tf.reduce_sum", "axis", "keepdims", tf_axes=True),
    "mean": _reduction("tf.reduce_mean", "axis", "keepdims", tf_axes=True),
    "max": _reduction("tf.reduce_max", "axis", "keepdims", tf_axes=True),
    "reshape": lambda a: f"tf.reshape({a.x}, {a.shape})",
    "permute_dims": lambda a: f"tf.transpose({a.x}, {a.axes})",
    "concat": lambda a: f"tf.concat({a.xs}, axis={a.axis})",
    "stack": lambda a: f"tf.stack({a.xs}" + _kw("axis", a.axis, "0") + ")",
    "take": lambda a: f"tf.gather({a.x}, {a.indices}" + _kw("axis", a.axis, "0") + ")",
    "where": lambda a: f"where({a.cond}, {a.x}, {a.y})",
    "softmax": lambda a: f"tf.nn.softmax({a.x}, axis={a.axis})",
    "logsumexp": _reduction("tf.reduce_logsumexp", "axis", "keepdims", tf_axes=True),
    "conv2d": lambda a: f"conv2d({a.x}, {a.w}" + _kw("stride", a.stride, "1") + _kw("padding", a.padding, "0") + ")",
    "max_pool2d": lambda a: f"max_pool2d({a.x}, {a.size})",
    "upsample2d": lambda a: f"upsample2d({a.x}, {a.scale})",
    "cumsum": lambda a: f"tf.math.cumsum({a.x}, axis={a.axis})",
}

EMITTERS = {"torch": TORCH, "jax": JAX, "tensorflow": TENSORFLOW}

# The adapters' multi-line ops, written out (each the adapter's own code, harness/frameworks/).
HELPERS = {
    "torch": {
        "take": '''def take(x, indices, axis=0):
    """Gather along `axis`: nn.Embedding's op for a 2-D table, else index_select."""
    axis = axis % x.ndim
    if axis == 0 and x.ndim == 2:
        return F.embedding(indices, x)
    flat = torch.index_select(x, axis, indices.reshape(-1))
    return flat.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1:])
''',
        "max_pool2d": '''def max_pool2d(x, size=2):
    return F.max_pool2d(x, kernel_size=size, stride=size)
''',
    },
    "jax": {
        "conv2d": '''def conv2d(x, w, stride=1, padding=0):
    """x NCHW, w OIHW, as torch.nn.functional.conv2d."""
    return lax.conv_general_dilated(x, w, window_strides=(stride, stride),
                                    padding=((padding, padding), (padding, padding)),
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))
''',
        "max_pool2d": '''def max_pool2d(x, size=2):
    """Max over size x size windows, stride size, NCHW; (max, -inf) is the max monoid, so
    JAX uses its differentiable reduce_window_max."""
    window = (1, 1, size, size)
    return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, window, "VALID")
''',
        "upsample2d": '''def upsample2d(x, scale=2):
    n, c, h, w = x.shape
    return jax.image.resize(x, (n, c, h * scale, w * scale), method="nearest")
''',
    },
    "tensorflow": {
        "where": '''def where(cond, x, y):
    """tf.where with a Python number on either side as the other's dtype."""
    if isinstance(x, (int, float)):
        x = tf.constant(x, dtype=y.dtype)
    if isinstance(y, (int, float)):
        y = tf.constant(y, dtype=x.dtype)
    return tf.where(cond, x, y)
''',
        "conv2d": '''def conv2d(x, w, stride=1, padding=0):
    """x NCHW, w OIHW. TF's CPU conv2d wants NHWC: NCHW -> NHWC, OIHW -> HWIO, and back;
    "SAME" where the padding is exactly that (the form TF users write)."""
    k = w.shape[2]
    if padding == 0:
        pad = "VALID"
    elif stride == 1 and k == w.shape[3] and 2 * padding + 1 == k:
        pad = "SAME"
    else:
        pad = [[0, 0], [padding, padding], [padding, padding], [0, 0]]
    out = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), tf.transpose(w, [2, 3, 1, 0]), strides=stride, padding=pad)
    return tf.transpose(out, [0, 3, 1, 2])
''',
        "max_pool2d": '''def max_pool2d(x, size=2):
    """NCHW; TF's CPU max_pool is NHWC only."""
    out = tf.nn.max_pool2d(tf.transpose(x, [0, 2, 3, 1]), ksize=size, strides=size, padding="VALID")
    return tf.transpose(out, [0, 3, 1, 2])
''',
        "upsample2d": '''def upsample2d(x, scale=2):
    return tf.repeat(tf.repeat(x, scale, axis=2), scale, axis=3)
''',
    },
}

#: what the plain loop of a chain is, written once into a script that has one
CHAIN = '''def chain(step, x, n, consts):
    """x_n for x_{i+1} = step(i, x_i, consts): the plain loop (the sweep ran no remat)."""
    for i in range(n):
        x = step(i, x, consts)
    return x
'''


def emit(framework, op, args, general=False):
    """The expression (source) of `op` called with `args` ({parameter: source}) in
    `framework`, and the helper it calls (a name of HELPERS[framework], or None).
    `general`: for arguments known only at run time (a function's parameters), not
    written out at the call (an emitter that reads its arguments' source has a
    `general` form for that)."""
    table = EMITTERS[framework]
    if op not in table:
        raise NotEmitted(f"op {op!r} has no {framework} emitter (harness/upstream/emitters.py)")
    emitter = getattr(table[op], "general", table[op]) if general else table[op]
    text = emitter(SimpleNamespace(**args))
    called = ast.parse(text, mode="eval").body
    name = called.func.id if isinstance(called, ast.Call) and isinstance(called.func, ast.Name) else None
    return text, (name if name in HELPERS.get(framework, {}) else None)
