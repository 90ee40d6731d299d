"""U-Net: an encoder-decoder whose skip connections concatenate encoder maps.

From cybertronai/gradient-checkpointing #11 ("gradients_memory require more memory
than tf.Optimizer.minimize"): on gchlebus's U-Net, the memory-saving gradients used
*more* memory than plain ``minimize`` (96 MB against 75 MB), because their heuristic
looks for articulation points and a U-Net has none: every skip connection keeps an
encoder map alive until the decoder comes back to its level.

The issue's model (gchlebus.github.io, code/profiling-tf-models, commit ca55f92, the
one the issue links): input 1 channel, blocks of two 3x3 same-padded convs with bias
and ReLU, ``filters`` channels at the top and twice as many per level down, 2x2 max
pooling down, a 2x2 stride-2 transposed conv up, concatenation with the encoder map,
a 1x1 conv to 2 output channels, softmax cross-entropy against labels drawn uniform
in [0, 1) as in its profiler (not normalised, as there). Its profiler ran one 128x128
image with filters=16 and one level down: that is ``paper``.

Differences: the op set has no transposed conv, so "up" is nearest upsampling then a
3x3 conv (the other common U-Net up-path), without activation like the original;
dropout is left out (it would make gradients random). ``levels`` (how many times the
encoder pools) is a size parameter: 1 as in the issue, 2 in the test and CI sizes so
their skip connections nest.

Segments: every encoder block (two convs + ReLUs) and every decoder step (upsample,
up-conv, concatenation with the skip, the block's two convs + ReLUs) is one
``checkpoint``; a decoder segment takes its skip as an explicit argument. The pooling,
the output conv and the loss are outside. The skip connections cross the segments, so
each encoder output stays live until its decoder step whatever the remat: that is the
#11 story (no articulation points).
"""

import math

from harness.workloads import itemsize

SOURCE = "cybertronai/gradient-checkpointing #11 (gchlebus's U-Net)"
STRESSES = "skip connections (no articulation points), conv activations"
SEGMENTS = "each encoder block and each decoder step (up-conv, skip concat, block) as a checkpoint"
SIZES = {
    "tiny": {"N": 1, "C_in": 1, "C_out": 2, "HW": 8, "filters": 3, "levels": 2},
    "small": {"N": 2, "C_in": 1, "C_out": 2, "HW": 64, "filters": 8, "levels": 2},
    "paper": {"N": 1, "C_in": 1, "C_out": 2, "HW": 128, "filters": 16, "levels": 1},
}
BATCH_AXIS = "N"  # the images of the batch


def convs(cfg):
    """(name, in_channels, out_channels, kernel) of every conv, in forward order."""
    F, L = cfg["filters"], cfg["levels"]
    layers, c_in = [], cfg["C_in"]
    for level in range(L + 1):  # encoder blocks, the bottom one included
        c = F * 2**level
        layers += [(f"enc{level}a", c_in, c, 3), (f"enc{level}b", c, c, 3)]
        c_in = c
    for level in reversed(range(L)):  # decoder: up-conv, then a block on the concat
        c = F * 2**level
        layers += [(f"up{level}", c_in, c, 3), (f"dec{level}a", 2 * c, c, 3), (f"dec{level}b", c, c, 3)]
        c_in = c
    layers.append(("out", c_in, cfg["C_out"], 1))
    return layers


def init(rng, cfg, dtype):
    if cfg["HW"] % 2 ** cfg["levels"]:
        raise ValueError(f"image side {cfg['HW']} must be divisible by 2**levels")
    params = {}
    for name, c_in, c_out, k in convs(cfg):
        fan_in = c_in * k * k
        gain = 1.0 if name.startswith(("up", "out")) else 2.0  # He init before ReLU
        params[f"{name}_w"] = rng.standard_normal((c_out, c_in, k, k)) * math.sqrt(gain / fan_in)
        params[f"{name}_b"] = 0.1 * rng.standard_normal(c_out)
    shape = (cfg["N"], cfg["C_in"], cfg["HW"], cfg["HW"])
    inputs = {
        "image": rng.random(shape),
        "labels": rng.random((cfg["N"], cfg["C_out"], cfg["HW"], cfg["HW"])),
    }
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return cast(params), cast(inputs)


def _conv(ops, params, name, x, padding=1):
    w, b = params[f"{name}_w"], params[f"{name}_b"]
    y = ops.conv2d(x, w, stride=1, padding=padding)
    return ops.add(y, ops.reshape(b, (1, -1, 1, 1)))


def _block(ops, params, prefix, x):
    x = ops.relu(_conv(ops, params, f"{prefix}a", x))
    return ops.relu(_conv(ops, params, f"{prefix}b", x))


def _params_of(params, *layers):
    """The flat dict of the named convs' weights and biases (a segment's consts)."""
    return {f"{name}_{part}": params[f"{name}_{part}"] for name in layers for part in ("w", "b")}


def loss(ops, params, inputs, cfg):
    L = cfg["levels"]

    def encoder(level):
        def segment(x, p):
            return _block(ops, p, f"enc{level}", x)

        return segment

    def decoder(level):
        def segment(x, skip, p):
            up = _conv(ops, p, f"up{level}", ops.upsample2d(x, 2))
            return _block(ops, p, f"dec{level}", ops.concat([up, skip], axis=1))

        return segment

    skips, x = [], inputs["image"]
    for level in range(L):
        x = ops.checkpoint(encoder(level), x, _params_of(params, f"enc{level}a", f"enc{level}b"))
        skips.append(x)
        x = ops.max_pool2d(x, 2)
    x = ops.checkpoint(encoder(L), x, _params_of(params, f"enc{L}a", f"enc{L}b"))
    for level in reversed(range(L)):
        p = _params_of(params, f"up{level}", f"dec{level}a", f"dec{level}b")
        x = ops.checkpoint(decoder(level), x, skips[level], p)
    logits = _conv(ops, params, "out", x, padding=0)  # (N, C_out, H, W)
    # tf.losses.softmax_cross_entropy: mean over pixels of -sum_c labels * log_softmax
    log_probs = ops.sub(logits, ops.logsumexp(logits, axis=1, keepdims=True))
    return ops.neg(ops.mean(ops.sum(ops.mul(inputs["labels"], log_probs), axis=1)))


def bound_bytes(cfg, dtype):
    # Each conv's weight gradient needs the conv's input, and each ReLU's VJP needs its
    # output (or a same-sized pre-activation), so every ReLU output is stored: at level
    # l (side HW/2^l, F*2^l channels) the encoder's two, and for l < levels the
    # decoder's two; the encoder's second one is also the skip and the pooling's
    # input. Stored as well: each pooled map (the next level's conv input), each
    # up-conv output (half of the decoder conv's input; the other half is the skip,
    # already counted), and the logits (the softmax VJP needs them). The upsampled
    # maps and the concatenations are copies of counted tensors: left out, since a
    # framework may fuse them away. All of it is live at the end of the forward pass.
    # Every term has one factor N: per image, the same sum with N = 1.
    c = cfg
    N, F, L, side = c["N"], c["filters"], c["levels"], c["HW"]
    elements = N * c["C_out"] * side * side  # logits
    for level in range(L + 1):
        maps = (F * 2**level) * (side // 2**level) ** 2
        elements += N * maps * 2  # the encoder block's two ReLU outputs
        if level < L:
            elements += N * maps // 4  # the pooled map
            elements += N * maps * 3  # up-conv output + the decoder block's two ReLUs
    return elements * itemsize(dtype)
