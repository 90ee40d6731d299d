"""A pre-norm transformer block: ``y = h + MLP(LN2(h))``, ``h = x + Attn(LN1(x))``.

The block every current language model stacks (Vaswani et al. 2017, "Attention is all
you need", in its pre-norm form), written with the op set as it is: layer norm is
composed from mean, sub, mul, add, sqrt and div (no new op), attention is multi-head
with the heads as a reshape and a permutation, the MLP is two matmuls around a relu.
It stresses what the six others do not: the (B, H, T, T) attention probabilities, the
one activation that grows with the square of the sequence, and layer norm's
elementwise intermediates, which a framework that fuses layer norm does not keep.

Segments: the attention and the MLP are each one ``checkpoint`` (a remat strategy may
keep only their inputs).
"""

import math

from harness.workloads import itemsize

SOURCE = "Vaswani et al. 2017 (pre-norm transformer block)"
STRESSES = "(B, H, T, T) attention probabilities; layer norm's elementwise intermediates"
SEGMENTS = "the attention and the MLP, one checkpoint each"
SIZES = {
    "tiny": {"B": 2, "T": 6, "D": 8, "H": 2, "F": 16},
    "small": {"B": 8, "T": 128, "D": 256, "H": 4, "F": 1024},
    # GPT-2 small's block (D 768, 12 heads, F = 4D) at its context of 1024, batch 8
    "paper": {"B": 8, "T": 1024, "D": 768, "H": 12, "F": 3072},
}
BATCH_AXIS = "B"  # sequences
EPS = 1e-5


def init(rng, cfg, dtype):
    D, F = cfg["D"], cfg["F"]

    def dense(n_in, n_out):  # variance 1/n_in: activations stay O(1)
        return (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(dtype)

    params = {
        "ln1_g": (1 + 0.1 * rng.standard_normal(D)).astype(dtype),
        "ln1_b": (0.1 * rng.standard_normal(D)).astype(dtype),
        "wq": dense(D, D), "wk": dense(D, D), "wv": dense(D, D), "wo": dense(D, D),
        "ln2_g": (1 + 0.1 * rng.standard_normal(D)).astype(dtype),
        "ln2_b": (0.1 * rng.standard_normal(D)).astype(dtype),
        "w1": dense(D, F), "w2": dense(F, D),
    }
    x = rng.standard_normal((cfg["B"], cfg["T"], D)).astype(dtype)
    return params, {"x": x}


def layer_norm(ops, x, g, b):
    mu = ops.mean(x, axis=-1, keepdims=True)
    xc = ops.sub(x, mu)
    var = ops.mean(ops.mul(xc, xc), axis=-1, keepdims=True)
    inv = ops.div(1.0, ops.sqrt(ops.add(var, EPS)))
    return ops.add(ops.mul(ops.mul(xc, inv), g), b)


def attention(ops, x, p, cfg):
    B, T, D, H = cfg["B"], cfg["T"], cfg["D"], cfg["H"]
    a = layer_norm(ops, x, p["ln1_g"], p["ln1_b"])

    def heads(m):  # (B, T, D) -> (B, H, T, D/H)
        return ops.permute_dims(ops.reshape(m, (B, T, H, D // H)), (0, 2, 1, 3))

    q, k, v = (heads(ops.matmul(a, p[w])) for w in ("wq", "wk", "wv"))
    scores = ops.mul(ops.matmul(q, ops.permute_dims(k, (0, 1, 3, 2))), 1.0 / math.sqrt(D // H))
    o = ops.matmul(ops.softmax(scores, axis=-1), v)  # (B, H, T, D/H)
    o = ops.reshape(ops.permute_dims(o, (0, 2, 1, 3)), (B, T, D))
    return ops.add(x, ops.matmul(o, p["wo"]))


def mlp(ops, h, p):
    a = layer_norm(ops, h, p["ln2_g"], p["ln2_b"])
    return ops.add(h, ops.matmul(ops.relu(ops.matmul(a, p["w1"])), p["w2"]))


def loss(ops, params, inputs, cfg):
    attn = {k: params[k] for k in ("ln1_g", "ln1_b", "wq", "wk", "wv", "wo")}
    ffn = {k: params[k] for k in ("ln2_g", "ln2_b", "w1", "w2")}
    h = ops.checkpoint(lambda x, p: attention(ops, x, p, cfg), inputs["x"], attn)
    y = ops.checkpoint(lambda h, p: mlp(ops, h, p), h, ffn)
    return ops.mean(ops.mul(y, y))


def bound_bytes(cfg, dtype):
    # What the VJPs of a store-everything pass read, per sequence (T tokens, width D):
    # - the second layer norm: the centred xc (mul(xc, xc)'s and mul(xc, inv)'s VJPs)
    #   and per token sqrt's output and 1 / it (div's VJP): T D + 2 T; the normalised
    #   n = xc * inv, which mul(n, g)'s VJP reads for g's gradient, is a product of
    #   those two, so it costs nothing more; its output a (T, D), read by w1's
    #   gradient: T D;
    # - the first layer norm: x is an input, not a variable, so its mean, centring and
    #   scale are constants of the gradient: only n (g's gradient) and the output a
    #   (wq, wk, wv's gradients) are read: 2 T D;
    # - attention: q, k, v (3 T D; the two score/output matmuls read them), the
    #   probabilities (H T T: softmax's VJP and p @ v's), the heads joined back (T D:
    #   wo's gradient);
    # - MLP: relu's output (T F: relu's VJP and w2's gradient);
    # - the loss: y (T D: mul(y, y)'s VJP).
    # x, the params and the (T, D) outputs no VJP reads (q k^T before scaling, the
    # residual sums, a @ w1 before relu) are not kept. Every term has one factor of B.
    B, T, D, H, F = cfg["B"], cfg["T"], cfg["D"], cfg["H"], cfg["F"]
    per_sequence = 9 * T * D + 2 * T + H * T * T + T * F
    return B * per_sequence * itemsize(dtype)
