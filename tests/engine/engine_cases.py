"""Every primitive of the engine's op set, called over combinations of shapes,
broadcasting, axes and keepdims (HIPS autograd's combo_check, spelled out).

CASES: id -> (fn, args), where fn(ops, *args) is written against an op namespace (as
workloads are), so the same case runs on the engine and on a NumPy reference. Floating args are float64 here (the gradient check's
precision); the dtype tests cast them. Values are kept away from kinks and poles
(relu at 0, log and sqrt at 0, 1/x at 0) so central differences are smooth.
"""

import itertools

import numpy as np


_rng = np.random.default_rng(1234)


def normal(*shape):
    return np.asarray(_rng.standard_normal(shape))


def positive(*shape):
    return np.asarray(_rng.uniform(0.5, 2.0, shape))


def away_from_zero(*shape):
    return np.asarray(normal(*shape) + np.sign(normal(*shape)) * 0.3)


CASES = {}


def case(name, fn, *args):
    assert name not in CASES, name
    CASES[name] = (fn, args)


# ---- elementwise binary: broadcasting pairs, Python scalars on either side -----------
PAIRS = [((), ()), ((3,), ()), ((), (3,)), ((3, 2), (3, 2)), ((3, 2), (2,)), ((1, 2), (3, 1)), ((2, 3, 2), (3, 1))]
for op in ["add", "sub", "mul", "div"]:
    for sx, sy in PAIRS:
        y = positive(*sy) if op == "div" else normal(*sy)
        case(f"{op}{list(sx)}{list(sy)}", lambda ops, x, y, op=op: getattr(ops, op)(x, y), normal(*sx), y)
    case(f"{op}_scalar_right", lambda ops, x, op=op: getattr(ops, op)(x, 2.5), normal(3, 2))
    case(f"{op}_scalar_left", lambda ops, x, op=op: getattr(ops, op)(2.5, x), positive(3, 2))
    case(f"{op}_same_var", lambda ops, x, op=op: getattr(ops, op)(x, x), positive(3, 2))

# ---- unary ---------------------------------------------------------------------------
UNARY = {"neg": normal, "exp": normal, "log": positive, "sqrt": positive, "tanh": normal,
         "sigmoid": normal, "relu": away_from_zero, "sin": normal, "cos": normal}  # fmt: skip
for op, make in UNARY.items():
    for shape in [(), (3,), (3, 2), (2, 1, 3)]:
        case(f"{op}{list(shape)}", lambda ops, x, op=op: getattr(ops, op)(x), make(*shape))

# ---- matmul: 2-D and batched with broadcast batch dims ---------------------------------
for sa, sb in [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((1, 4), (4, 1))]:
    case(f"matmul{list(sa)}{list(sb)}", lambda ops, a, b: ops.matmul(a, b), normal(*sa), normal(*sb))

# fan-in: the second use's cotangent is added into the first's buffer a block at a time
# (prims.linalg.product_cotangent), or made whole where a broadcast must be summed away
case("matmul_fanin_weight", lambda ops, a, w: ops.matmul(ops.matmul(a, w), w), normal(3, 4), normal(4, 4))
case("matmul_fanin_folded", lambda ops, a, w: ops.matmul(ops.matmul(a, w), w), normal(2, 3, 4), normal(4, 4))
case("matmul_fanin_input", lambda ops, a, w: ops.matmul(w, ops.matmul(w, a)), normal(4, 3), normal(4, 4))
case("matmul_fanin_broadcast", lambda ops, a, w: ops.matmul(ops.matmul(a, w), w), normal(3, 4), normal(2, 4, 4))

# ---- reductions: every axis spelling, keepdims both ways ---------------------------------
for op in ["sum", "mean", "max"]:
    for axis, keepdims in itertools.product([None, 0, 1, -1, (0, 2), (0, 1, 2)], [False, True]):
        fn = lambda ops, x, op=op, a=axis, k=keepdims: getattr(ops, op)(x, axis=a, keepdims=k)
        case(f"{op}_axis{axis}_keep{keepdims}", fn, normal(2, 3, 4))
    case(f"{op}_0d", lambda ops, x, op=op: getattr(ops, op)(x), normal())
    case(f"{op}_positional_axis", lambda ops, x, op=op: getattr(ops, op)(x, 1), normal(2, 3))

# ---- shape ops ---------------------------------------------------------------------------
case("reshape", lambda ops, x: ops.reshape(x, (4, 6)), normal(2, 3, 4))
case("reshape_minus1", lambda ops, x: ops.reshape(x, (-1, 2)), normal(2, 3, 4))
case("reshape_to_0d", lambda ops, x: ops.reshape(x, ()), normal(1, 1))
case("reshape_noncontiguous", lambda ops, x: ops.reshape(ops.permute_dims(x, (1, 0)), (-1,)), normal(3, 4))
case("permute_dims", lambda ops, x: ops.permute_dims(x, (2, 0, 1)), normal(2, 3, 4))
case("permute_dims_negative", lambda ops, x: ops.permute_dims(x, (-1, 0, 1)), normal(2, 3, 4))
for axis in [0, 1, -1]:
    case(f"concat_axis{axis}", lambda ops, x, y, a=axis: ops.concat([x, y, x], axis=a), normal(2, 3), normal(2, 3))
    case(f"stack_axis{axis}", lambda ops, x, y, a=axis: ops.stack([x, y, x], axis=a), normal(2, 3), normal(2, 3))
case("concat_uneven", lambda ops, x, y: ops.concat([x, y], axis=1), normal(2, 3), normal(2, 5))
case("concat_one", lambda ops, x: ops.concat([x], axis=0), normal(2, 3))
KEYS = {"int": 1, "slice": slice(1, None), "step": slice(None, None, 2), "negative": -1,
        "tuple": (slice(None), 2), "ellipsis": (Ellipsis, 0), "newaxis": (None, slice(0, 2)),
        "mixed": (1, None, Ellipsis, slice(None, None, -1))}  # fmt: skip
for name, key in KEYS.items():
    case(f"getitem_{name}", lambda ops, x, key=key: ops.getitem(x, key), normal(3, 4, 2))
case("getitem_overlapping", lambda ops, x: ops.add(ops.getitem(x, slice(0, 2)), ops.getitem(x, slice(1, 3))), normal(3, 2))

# ---- indexing ----------------------------------------------------------------------------
IDX = np.array([2, 0, 2, 1])  # repeated: the VJP must add, not assign
case("take_axis0", lambda ops, x: ops.take(x, IDX, axis=0), normal(3, 2))
case("take_axis1", lambda ops, x: ops.take(x, IDX, axis=1), normal(2, 3))
case("take_axis_neg", lambda ops, x: ops.take(x, IDX, axis=-1), normal(2, 2, 3))
case("take_2d_indices", lambda ops, x: ops.take(x, IDX.reshape(2, 2), axis=0), normal(3, 5))
case("take_embedding", lambda ops, E: ops.take(E, np.array([[0, 3, 3], [1, 0, 2]])), normal(4, 3))
MASK = _rng.random((3, 4)) > 0.5
case("where", lambda ops, x, y: ops.where(MASK, x, y), normal(3, 4), normal(3, 4))
case("where_broadcast", lambda ops, x, y: ops.where(MASK, x, y), normal(4), normal(3, 1))
case("where_scalar", lambda ops, x: ops.where(MASK, x, 0.0), normal(3, 4))
case("where_scalar_left", lambda ops, y: ops.where(MASK, -1.0, y), normal(3, 4))

# ---- neural-network ops --------------------------------------------------------------------
for axis in [-1, 0, 1]:
    case(f"softmax_axis{axis}", lambda ops, x, a=axis: ops.softmax(x, axis=a), normal(3, 4))
for axis, keepdims in itertools.product([-1, 0, (0, 1), None], [False, True]):
    case(f"logsumexp_axis{axis}_keep{keepdims}", lambda ops, x, a=axis, k=keepdims: ops.logsumexp(x, axis=a, keepdims=k), normal(3, 4))
for axis in [-1, 0, (0, 1)]:  # logsumexp's cotangent added into x's (prims.common.slabs)
    case(f"log_softmax_axis{axis}", lambda ops, x, a=axis: ops.sub(x, ops.logsumexp(x, axis=a, keepdims=True)), normal(3, 9))
case("softmax_large_values", lambda ops, x: ops.softmax(x * 100.0), normal(2, 5))
case("logsumexp_large_values", lambda ops, x: ops.logsumexp(x * 100.0), normal(2, 5))
for stride, padding in [(1, 0), (1, 1), (2, 0), (2, 1), (3, 2)]:
    case(f"conv2d_s{stride}_p{padding}", lambda ops, x, w, s=stride, p=padding: ops.conv2d(x, w, stride=s, padding=p),
         normal(2, 3, 7, 6), normal(4, 3, 3, 3))  # fmt: skip
case("conv2d_rect_kernel", lambda ops, x, w: ops.conv2d(x, w, padding=1), normal(1, 2, 5, 5), normal(3, 2, 1, 3))
case("conv2d_1x1", lambda ops, x, w: ops.conv2d(x, w), normal(2, 3, 4, 4), normal(5, 3, 1, 1))
# one channel in (the forward's windows side by side, one product) and one channel out
# (x's gradient correlates a one-channel g, its pixels `stride` apart); odd widths
for stride, padding in [(1, 1), (2, 0), (3, 2)]:
    conv = lambda ops, x, w, s=stride, p=padding: ops.conv2d(x, w, stride=s, padding=p)
    case(f"conv2d_one_channel_in_s{stride}_p{padding}", conv, normal(2, 1, 7, 9), normal(3, 1, 3, 3))
    case(f"conv2d_one_channel_out_s{stride}_p{padding}", conv, normal(3, 2, 7, 5), normal(1, 2, 2, 3))
for size in [2, 3]:
    case(f"max_pool2d_{size}", lambda ops, x, s=size: ops.max_pool2d(x, s), normal(2, 3, 6, 6))
case("max_pool2d_ragged", lambda ops, x: ops.max_pool2d(x, 2), normal(1, 2, 5, 7))
case("max_pool2d_default", lambda ops, x: ops.max_pool2d(x), normal(1, 2, 4, 4))
for scale in [1, 2, 3]:
    case(f"upsample2d_{scale}", lambda ops, x, s=scale: ops.upsample2d(x, s), normal(2, 3, 2, 3))
for axis in [0, 1, -1]:
    case(f"cumsum_axis{axis}", lambda ops, x, a=axis: ops.cumsum(x, a), normal(3, 4))

# ---- saved as recipes (saving.py): a copy, view or sum of arrays that cost nothing to
# keep (leaves here, or saved by another VJP) is kept as them and remade by the VJP
# reading it; a slice of a buffer nothing keeps is kept as a compact copy ------------------
case("remade_concat_into_matmul", lambda ops, a, b, w: ops.matmul(ops.concat([ops.tanh(a), b], axis=-1), w),
     normal(5, 3), normal(5, 2), normal(5, 4))  # fmt: skip  (w's gradient part by part)
case("remade_concat_into_batched_matmul", lambda ops, a, b, w: ops.matmul(ops.concat([a, ops.sin(b)], axis=-1), w),
     normal(2, 3, 3), normal(2, 3, 2), normal(5, 4))  # fmt: skip
case("remade_concat_into_conv2d", lambda ops, a, b, w: ops.conv2d(ops.concat([ops.relu(a), b], axis=1), w, padding=1),
     away_from_zero(2, 2, 5, 4), normal(2, 1, 5, 4), normal(3, 3, 3, 3))  # fmt: skip  (w's gradient slab by slab)
for stride, padding in [(1, 1), (2, 0), (2, 1)]:
    case(f"remade_upsample_into_conv2d_s{stride}_p{padding}",
         lambda ops, a, w, s=stride, p=padding: ops.conv2d(ops.upsample2d(ops.tanh(a), 2), w, stride=s, padding=p),
         normal(2, 2, 3, 4), normal(3, 2, 3, 3))  # fmt: skip
case("remade_difference_into_mul", lambda ops, h, x, z: ops.mul(z, ops.sub(h, ops.tanh(x))),
     normal(3, 4), normal(3, 4), normal(3, 4))  # fmt: skip  (z's gradient remakes h - n)
case("remade_nested_into_mul", lambda ops, a, b, c: ops.mul(ops.reshape(ops.mul(ops.sub(1.0, ops.exp(a)), b), (6,)), c),
     normal(2, 3), normal(2, 3), normal(6))  # fmt: skip
case("remade_stack_into_matmul", lambda ops, a, b, w: ops.matmul(ops.stack([ops.tanh(a), ops.tanh(b)], axis=1), w),
     normal(3, 4), normal(3, 4), normal(4, 2))  # fmt: skip
case("compact_slice_into_mul", lambda ops, a, w, r: ops.mul(r, ops.getitem(ops.matmul(a, w), (Ellipsis, slice(4, 6)))),
     normal(3, 4), normal(4, 6), normal(3, 2))  # fmt: skip
case("logsumexp_into_sub", lambda ops, x: ops.sub(x, ops.logsumexp(x, axis=1, keepdims=True)), normal(2, 5, 3))

# ---- segments: checkpoint and chain (plain under the default plan; test_remat.py runs
# these same cases under every remat plan) ----------------------------------------------
case("checkpoint_two_args", lambda ops, a, b: ops.checkpoint(lambda u, v: ops.tanh(ops.matmul(u, v)), a, b),
     normal(3, 4), normal(4, 2))  # fmt: skip
case("checkpoint_dict_arg", lambda ops, a, b: ops.checkpoint(lambda u, p: ops.mul(ops.sin(u), p["w"]), a, {"w": b}),
     normal(3, 2), normal(3, 2))  # fmt: skip
case("checkpoint_nested", lambda ops, a: ops.checkpoint(lambda u: ops.exp(ops.checkpoint(ops.sin, u)), a), normal(2, 3))
for n in [1, 2, 5, 9]:
    # step i depends on i (a different shift per step) and reuses its const every step
    case(f"chain_{n}_steps", lambda ops, a, w, n=n: ops.chain(
        lambda i, x, c: ops.tanh(ops.add(ops.matmul(x, c["w"]), 0.1 * i)), a, n, {"w": w}),
        normal(3, 3), 0.5 * normal(3, 3))  # fmt: skip


def float_args(args, dtype):
    """The case's floating arrays cast to `dtype` (other args unchanged)."""
    return [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
