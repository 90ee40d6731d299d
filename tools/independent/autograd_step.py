"""One steady training step of a workload in HIPS autograd (make_vjp), measured
without the harness (steady.py says how). The workloads are written here again with
autograd.numpy, op for op as harness/workloads/ computes them through the autograd
adapter: conv2d as im2col (autograd has no fast conv), max pooling as a reshape and a
max whose VJP keeps the gradient's dtype (autograd's own divides by an int64 count,
which would make float32 gradients float64)."""

import steady

steady.ensure_environment()

import math  # noqa: E402

import autograd.numpy as anp  # noqa: E402
import numpy as onp  # noqa: E402
from autograd import make_vjp  # noqa: E402
from autograd.extend import defvjp, primitive, vspace  # noqa: E402
from autograd.numpy.numpy_vjps import repeat_to_match_shape  # noqa: E402
from autograd.scipy.special import expit, logsumexp  # noqa: E402


@primitive
def amax(x, axis=None, keepdims=False):
    return onp.max(x, axis=axis, keepdims=keepdims)


def _amax_vjp(ans, x, axis=None, keepdims=False):
    shape, dtype = anp.shape(x), anp.result_type(x)

    def vjp(g):
        g_repeated, _ = repeat_to_match_shape(g, shape, dtype, axis, keepdims)
        chosen = x == repeat_to_match_shape(ans, shape, dtype, axis, keepdims)[0]
        return g_repeated * chosen / onp.sum(chosen, axis=axis, keepdims=True).astype(dtype)

    return vjp


defvjp(amax, _amax_vjp)


def relu(x):
    return x * (x > 0)


def mean(x, axis=None):
    n = math.prod(anp.shape(x)) if axis is None else anp.shape(x)[axis]
    return anp.sum(x, axis=axis) / n


# A parameter used in a loop is read from the dict once, as the harness's ops.chain
# does: each `p["x"]` on autograd's boxed dict is a node of its own, and indexing
# inside the loop measured 95.5 MiB backward peak on chained_dot small against 51.6
# with x read once: 44 MiB more, the size of x's 50 gradient contributions together.


def chained_dot(p, i, c):
    x, z = p["x"], i["z"]
    for _ in range(c["L"]):
        z = anp.matmul(x, z)
    return anp.sum(z)


def rnn_fanout(p, i, c):
    W, b, h = p["W"], p["b"], i["x"]
    for _ in range(c["n"]):
        h = anp.tanh(anp.matmul(h, W) + b)
    logit = anp.matmul(h, p["Wout"]) + p["bout"]
    return anp.sum(logit + anp.log(anp.exp(-logit) + 1.0) - i["label"] * logit)


def _im2col_conv(x, w, padding):
    if padding:
        x = anp.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), mode="constant")
    _, c, h, wd = anp.shape(x)
    o, _, kh, kw = anp.shape(w)
    ho, wo = h - kh + 1, wd - kw + 1
    cols = anp.stack([x[:, :, a : a + ho, b : b + wo] for a in range(kh) for b in range(kw)], axis=2)
    out = anp.tensordot(cols, anp.reshape(w, (o, c, kh * kw)), axes=([1, 2], [1, 2]))
    return anp.transpose(out, (0, 3, 1, 2))


def _conv(p, name, x, padding=1):
    return _im2col_conv(x, p[f"{name}_w"], padding) + anp.reshape(p[f"{name}_b"], (1, -1, 1, 1))


def _block(p, prefix, x):
    return relu(_conv(p, f"{prefix}b", relu(_conv(p, f"{prefix}a", x))))


def _max_pool(x):
    n, c, h, w = anp.shape(x)
    return amax(anp.reshape(x, (n, c, h // 2, 2, w // 2, 2)), axis=(3, 5))


def _upsample(x):
    n, c, h, w = anp.shape(x)
    tiled = anp.broadcast_to(anp.reshape(x, (n, c, h, 1, w, 1)), (n, c, h, 2, w, 2))
    return anp.reshape(tiled, (n, c, 2 * h, 2 * w))


def unet(p, i, c):
    levels, skips, x = c["levels"], [], i["image"]
    for level in range(levels):
        x = _block(p, f"enc{level}", x)
        skips.append(x)
        x = _max_pool(x)
    x = _block(p, f"enc{levels}", x)
    for level in reversed(range(levels)):
        up = _conv(p, f"up{level}", _upsample(x))
        x = _block(p, f"dec{level}", anp.concatenate([up, skips[level]], axis=1))
    logits = _conv(p, "out", x, padding=0)
    log_probs = logits - logsumexp(logits, axis=1, keepdims=True)
    return -mean(anp.sum(i["labels"] * log_probs, axis=1))


def tiny_nerf(p, i, c):
    rays, samples, depth = c["rays"], c["samples"], c["depth"]
    x = i["points"]
    features = [x]
    for k in range(c["freqs"]):
        scaled = x * float(2**k)
        features += [anp.sin(scaled), anp.cos(scaled)]
    encoded = anp.concatenate(features, axis=-1)
    h = encoded
    for layer in range(depth):
        h = relu(anp.matmul(h, p[f"W{layer}"]) + p[f"b{layer}"])
        if layer % 4 == 0 and layer > 0:
            h = anp.concatenate([h, encoded], axis=-1)
    raw = anp.reshape(anp.matmul(h, p[f"W{depth}"]) + p[f"b{depth}"], (rays, samples, 4))
    sigma = relu(raw[..., 3])
    rgb = expit(raw[..., 0:3])
    sd = sigma * i["deltas"]
    alpha = 1.0 - anp.exp(-sd)
    transmittance = anp.exp(-(anp.cumsum(sd, axis=1) - sd))
    weights = anp.reshape(alpha * transmittance, (rays, samples, 1))
    err = anp.sum(weights * rgb, axis=1) - i["target"]
    return mean(err * err)


def _gru(gi, h, U, H):
    gh = anp.matmul(h, U)
    r = expit(gi[..., 0:H] + gh[..., 0:H])
    z = expit(gi[..., H : 2 * H] + gh[..., H : 2 * H])
    n = anp.tanh(gi[..., 2 * H : 3 * H] + r * gh[..., 2 * H : 3 * H])
    return n + z * (h - n)


def seq2seq_attention(p, i, c):
    E, H, A, B, Ts, Tt = (c[k] for k in ("E", "H", "A", "B", "T_src", "T_tgt"))
    x = p["src_emb"][i["src"]]
    gi_all = anp.reshape(anp.matmul(x, p["enc_W"]) + p["enc_b"], (Ts, B, 3 * H))
    h, states = i["h0"], []
    for t in range(Ts):
        h = _gru(gi_all[t], h, p["enc_U"], H)
        states.append(h)
    enc = anp.stack(states, axis=1)
    keys = anp.reshape(anp.matmul(anp.reshape(enc, (B * Ts, H)), p["att_Wk"]), (B, Ts, A))
    y = anp.reshape(p["tgt_emb"][i["dec_in"]], (Tt, B, E))
    s, outputs = h, []
    for t in range(Tt):
        query = anp.reshape(anp.matmul(s, p["att_Wq"]), (B, 1, A))
        energy = anp.tanh(keys + query)
        scores = anp.reshape(anp.matmul(anp.reshape(energy, (B * Ts, A)), p["att_v"]), (B, Ts))
        weights = anp.exp(scores - logsumexp(scores, axis=-1, keepdims=True))
        context = anp.reshape(anp.matmul(anp.reshape(weights, (B, 1, Ts)), enc), (B, H))
        gi = anp.matmul(anp.concatenate([y[t], context], axis=-1), p["dec_W"]) + p["dec_b"]
        s = _gru(gi, s, p["dec_U"], H)
        outputs.append(s)
    states = anp.reshape(anp.stack(outputs, axis=0), (Tt * B, H))
    logits = anp.matmul(states, p["out_W"]) + p["out_b"]
    log_probs = logits - logsumexp(logits, axis=-1, keepdims=True)
    return -mean(anp.reshape(log_probs, (-1,))[i["target_flat"]])


def main():
    name, params, inputs, config = steady.arguments()
    loss_of = globals()[name]

    def forward():
        vjp, loss = make_vjp(lambda p: loss_of(p, inputs, config))(params)
        return loss, vjp

    def backward(state):
        loss, vjp = state
        return vjp(vspace(loss).ones())

    steady.report(steady.measure(forward, backward))


if __name__ == "__main__":
    main()
