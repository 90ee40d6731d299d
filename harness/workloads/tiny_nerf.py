"""Tiny NeRF: positional encoding, an 8-layer ReLU MLP, volume rendering along rays.

From candle #1241 ("How to reduce memory usage of backpropagation?"): a port of the
TensorFlow ``tiny_nerf`` notebook (bmild/nerf) ran on a laptop in TensorFlow but
exhausted 32 GB of RAM plus swap in candle, which kept gradients of nodes that do not
lead to any variable. The model is the notebook's: positions encoded as
``[x, sin(2^k x), cos(2^k x) for k < 6]`` (39 features), 8 dense layers of 256 with
ReLU, the encoding concatenated back after the 5th, a linear layer to (r, g, b,
sigma); sigma through ReLU, colour through a sigmoid, alpha = 1 - exp(-sigma * delta),
transmittance T_i = exp(-sum_{j<i} sigma_j delta_j) (an exclusive cumsum), pixel
colour sum_i alpha_i T_i rgb_i, and the MSE against the target pixels. ``paper`` is
one 65536-sample chunk as in the candle port (1024 rays x 64 samples).

The encoding is computed from the inputs alone: everything before the first layer is
off the path to the parameters, which is what the candle thread was about.

Differences from the notebook: the sample positions are synthetic rays (origins on a
sphere of radius 4 looking at the origin, stratified depths in [2, 6]) built with
NumPy in ``init``, and the last sample's delta is the mean spacing instead of 1e10 (with
1e10 the exclusive cumsum ``cumsum(sd) - sd`` cancels catastrophically in float32).

Segments: the dense ReLU stack is cut after every layer that concatenates the encoding
back (layer 4 here), giving two ``checkpoint`` segments: layers 0-4 (input: the
encoding; it ends with the concatenation) and layers 5-7. Not a ``chain``: the layers
differ in width and the concatenation breaks the step pattern. Each segment's
arguments are its input h and a flat dict of its layers' W, b, plus the encoding when
the segment concatenates it (explicit, never from a closure). The output layer and the
rendering are outside the segments.
"""

import math

import numpy as np

from harness.workloads import itemsize

SOURCE = "candle #1241 (tiny NeRF from the TensorFlow tiny_nerf notebook)"
STRESSES = "a large batch of samples through an MLP; work off the path to the params"
SEGMENTS = "the 8 ReLU layers as two checkpoint segments, layers 0-4 (with the skip concat) and 5-7"
SIZES = {
    "tiny": {"rays": 4, "samples": 8, "width": 16, "depth": 8, "freqs": 6},
    "small": {"rays": 64, "samples": 32, "width": 128, "depth": 8, "freqs": 6},
    "paper": {"rays": 1024, "samples": 64, "width": 256, "depth": 8, "freqs": 6},
}
BATCH_AXIS = "rays"  # each ray's samples are rendered into its own pixel
SKIP_AFTER = 4  # the notebook concatenates the encoding after layer i when i % 4 == 0 and i > 0
NEAR, FAR = 2.0, 6.0


def n_features(freqs):
    return 3 + 3 * 2 * freqs


def layer_widths(cfg):
    """(fan_in, fan_out) of every dense layer, the output layer last."""
    enc, width = n_features(cfg["freqs"]), cfg["width"]
    widths, fan_in = [], enc
    for i in range(cfg["depth"]):
        widths.append((fan_in, width))
        fan_in = width + enc if _skips(i) else width
    widths.append((fan_in, 4))
    return widths


def _skips(i):
    return i % SKIP_AFTER == 0 and i > 0


def segments(depth):
    """(first, stop) layer ranges of the checkpoint segments: cut after each skip layer."""
    cuts = [i + 1 for i in range(depth) if _skips(i)]
    bounds = sorted({0, *cuts, depth})
    return list(zip(bounds, bounds[1:]))


def init(rng, cfg, dtype):
    R, S = cfg["rays"], cfg["samples"]
    params = {}
    for i, (fan_in, fan_out) in enumerate(layer_widths(cfg)):
        gain = 2.0 if i < cfg["depth"] else 1.0  # He init for the ReLU layers
        params[f"W{i}"] = rng.standard_normal((fan_in, fan_out)) * math.sqrt(gain / fan_in)
        params[f"b{i}"] = 0.1 * rng.standard_normal(fan_out)
    params[f"b{cfg['depth']}"][3] += 1.0  # most samples start with some density

    # Rays from points on a sphere of radius 4 towards the origin (jittered), with
    # stratified depths: sample k of a ray lies in [near + k*step, near + (k+1)*step).
    origins = rng.standard_normal((R, 3))
    origins *= 4.0 / np.linalg.norm(origins, axis=1, keepdims=True)
    dirs = -origins / 4.0 + 0.1 * rng.standard_normal((R, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    step = (FAR - NEAR) / S
    z = NEAR + step * (np.arange(S) + rng.random((R, S)))
    points = origins[:, None, :] + dirs[:, None, :] * z[:, :, None]
    deltas = np.concatenate([np.diff(z, axis=1), np.full((R, 1), step)], axis=1)
    inputs = {
        "points": points.reshape(R * S, 3),
        "deltas": deltas,
        "target": rng.random((R, 3)),
    }
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return cast(params), cast(inputs)


def encode(ops, x, freqs):
    """[x, sin(2^k x), cos(2^k x) for k < freqs] (R*S, 3 + 6 freqs). A function of its
    own so that the 2 freqs sin/cos arrays are dropped once concatenated, rather than
    held by the loss's locals through the whole forward pass."""
    features = [x]
    for k in range(freqs):
        scaled = ops.mul(x, float(2**k))
        features += [ops.sin(scaled), ops.cos(scaled)]
    return ops.concat(features, axis=-1)


def loss(ops, params, inputs, cfg):
    R, S, depth = cfg["rays"], cfg["samples"], cfg["depth"]
    encoded = encode(ops, inputs["points"], cfg["freqs"])  # (R*S, 39): a function of the inputs only

    def layers(first, stop):
        def segment(h, consts):
            for i in range(first, stop):
                h = ops.relu(ops.add(ops.matmul(h, consts[f"W{i}"]), consts[f"b{i}"]))
                if _skips(i):
                    h = ops.concat([h, consts["encoded"]], axis=-1)
            return h

        return segment

    h = encoded
    for first, stop in segments(depth):
        consts = {key: params[key] for i in range(first, stop) for key in (f"W{i}", f"b{i}")}
        if any(_skips(i) for i in range(first, stop)):
            consts["encoded"] = encoded
        h = ops.checkpoint(layers(first, stop), h, consts)
    raw = ops.add(ops.matmul(h, params[f"W{depth}"]), params[f"b{depth}"])
    raw = ops.reshape(raw, (R, S, 4))

    sigma = ops.relu(ops.getitem(raw, (Ellipsis, 3)))  # (R, S)
    rgb = ops.sigmoid(ops.getitem(raw, (Ellipsis, slice(0, 3))))  # (R, S, 3)
    sd = ops.mul(sigma, inputs["deltas"])
    alpha = ops.sub(1.0, ops.exp(ops.neg(sd)))
    transmittance = ops.exp(ops.neg(ops.sub(ops.cumsum(sd, axis=1), sd)))  # exclusive
    weights = ops.reshape(ops.mul(alpha, transmittance), (R, S, 1))
    pixels = ops.sum(ops.mul(weights, rgb), axis=1)  # (R, 3)
    err = ops.sub(pixels, inputs["target"])
    return ops.mean(ops.mul(err, err))


def bound_bytes(cfg, dtype):
    # N = rays * samples points. Hidden layer i's output h_i (N, width) is the input of
    # layer i+1's matmul, whose weight needs a gradient, and ReLU's VJP needs it (or a
    # same-sized pre-activation), so h_1 .. h_depth are all live at the end of the
    # forward pass (the skip concatenation copies h_5 and the encoding: counted once,
    # as h_5). The rendering VJPs need per point the colour (3) and the weight (1)
    # (equivalently the 4 raw outputs they come from). The encoding itself is left
    # out: it depends on the inputs only, so a framework may recompute it from them.
    # Per ray: `samples` points.
    n = cfg["rays"] * cfg["samples"]
    return n * (cfg["depth"] * cfg["width"] + 4) * itemsize(dtype)
