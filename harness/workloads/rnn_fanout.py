"""A tanh RNN that reuses its weights every step: ``h <- tanh(h @ W + b)``, n times.

From HIPS autograd #219 ("backprop eats all my RAM"), whose RNN benchmark became
autograd's ``benchmarks/bench_rnn.py``: batch 16, D = 1024, float32, n = 50 steps,
then a logistic loss on the last hidden state through a (D, 1) readout. W and b fan
out to all n steps, so their gradients receive n contributions: an engine that keeps
them apart instead of accumulating in place holds n W-sized buffers (measured:
~17x the hand-written gradient under an unrolled ``jax.jit``).

Differences from bench_rnn.py, both for well-scaled values: its inits are
``0.01 * randn`` everywhere, which shrinks the hidden state by ~0.3x per step and the
gradient of early steps towards float32's denormal range; here W ~ N(0, 0.9^2 / D)
(spectral radius ~0.9: neither exploding nor vanishing over 50 steps) and x ~ N(0, 1).

Segments: the n steps are one ``chain`` (consts {"W", "b"}); the readout and the loss
are outside it.
"""

import math

from harness.workloads import itemsize

SOURCE = "HIPS autograd #219 (RNN benchmark: autograd benchmarks/bench_rnn.py)"
STRESSES = "W and b reused every step: n gradient contributions to accumulate in place"
SEGMENTS = "the n RNN steps as one chain (consts: W, b)"
SIZES = {
    "tiny": {"B": 4, "D": 16, "n": 6},
    "small": {"B": 16, "D": 512, "n": 50},
    "paper": {"B": 16, "D": 1024, "n": 50},  # bench_rnn.py
}
BATCH_AXIS = "B"  # the sequences of the batch


def init(rng, cfg, dtype):
    B, D = cfg["B"], cfg["D"]
    params = {
        "W": 0.9 / math.sqrt(D) * rng.standard_normal((D, D)),
        "b": 0.1 * rng.standard_normal(D),
        "Wout": rng.standard_normal((D, 1)) / math.sqrt(D),
        "bout": 0.1 * rng.standard_normal(1),
    }
    inputs = {
        "x": rng.standard_normal((B, D)),
        "label": (rng.random((B, 1)) > 0.5).astype(float),
    }
    cast = lambda tree: {k: v.astype(dtype) for k, v in tree.items()}
    return cast(params), cast(inputs)


def loss(ops, params, inputs, cfg):
    def rnn_step(i, h, consts):  # h_{t+1} = tanh(h_t @ W + b)
        return ops.tanh(ops.add(ops.matmul(h, consts["W"]), consts["b"]))

    h = ops.chain(rnn_step, inputs["x"], cfg["n"], {"W": params["W"], "b": params["b"]})
    logit = ops.add(ops.matmul(h, params["Wout"]), params["bout"])  # (B, 1)
    # bench_rnn.py's logistic loss: -sum(label*logit - (logit + log(1 + exp(-logit))))
    softplus_neg = ops.log(ops.add(ops.exp(ops.neg(logit)), 1.0))
    return ops.sum(ops.sub(ops.add(logit, softplus_neg), ops.mul(inputs["label"], logit)))


def bound_bytes(cfg, dtype):
    # Step t computes h_t = tanh(h_{t-1} @ W + b). W's gradient needs h_{t-1} and tanh's
    # VJP needs h_t (or its same-sized pre-activation), so h_1 .. h_n (h_n also feeds
    # the readout) are all live at the end of the forward pass: n (B, D) arrays. h_0 = x
    # is an input (in the baseline); the (B, 1) loss terms are negligible and left out.
    # Per sequence: n D-vectors.
    return cfg["n"] * cfg["B"] * cfg["D"] * itemsize(dtype)
