"""One steady training step of a workload in JAX, measured without the harness
(steady.py says how): eager = jax.vjp and its VJP function, no jit; compiled = the one
program JAX users write, jax.jit(jax.value_and_grad(loss)). The workloads are written here again with
jax.numpy / jax.lax / jax.nn, op for op as harness/workloads/ computes them through
the JAX adapter."""

import steady

steady.ensure_environment()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # as the adapter: float64 cells stay float64


def chained_dot(p, i, c):
    z = i["z"]
    for _ in range(c["L"]):
        z = jnp.matmul(p["x"], z)
    return jnp.sum(z)


def rnn_fanout(p, i, c):
    h = i["x"]
    for _ in range(c["n"]):
        h = jnp.tanh(jnp.add(jnp.matmul(h, p["W"]), p["b"]))
    logit = jnp.add(jnp.matmul(h, p["Wout"]), p["bout"])
    softplus_neg = jnp.log(jnp.add(jnp.exp(jnp.negative(logit)), 1.0))
    return jnp.sum(jnp.subtract(jnp.add(logit, softplus_neg), jnp.multiply(i["label"], logit)))


def _conv(p, name, x, padding=1):
    y = lax.conv_general_dilated(x, p[f"{name}_w"], (1, 1), ((padding, padding), (padding, padding)),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jnp.add(y, jnp.reshape(p[f"{name}_b"], (1, -1, 1, 1)))


def _block(p, prefix, x):
    return jax.nn.relu(_conv(p, f"{prefix}b", jax.nn.relu(_conv(p, f"{prefix}a", x))))


def _max_pool(x):
    window = (1, 1, 2, 2)
    return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, window, "VALID")


def _upsample(x):
    n, c, h, w = x.shape
    return jax.image.resize(x, (n, c, 2 * h, 2 * w), method="nearest")


def unet(p, i, c):
    levels, skips, x = c["levels"], [], i["image"]
    for level in range(levels):
        x = _block(p, f"enc{level}", x)
        skips.append(x)
        x = _max_pool(x)
    x = _block(p, f"enc{levels}", x)
    for level in reversed(range(levels)):
        up = _conv(p, f"up{level}", _upsample(x))
        x = _block(p, f"dec{level}", jnp.concatenate([up, skips[level]], axis=1))
    logits = _conv(p, "out", x, padding=0)
    log_probs = jnp.subtract(logits, jax.nn.logsumexp(logits, axis=1, keepdims=True))
    return jnp.negative(jnp.mean(jnp.sum(jnp.multiply(i["labels"], log_probs), axis=1)))


def tiny_nerf(p, i, c):
    rays, samples, depth = c["rays"], c["samples"], c["depth"]
    x = i["points"]
    features = [x]
    for k in range(c["freqs"]):
        scaled = jnp.multiply(x, float(2**k))
        features += [jnp.sin(scaled), jnp.cos(scaled)]
    encoded = jnp.concatenate(features, axis=-1)
    h = encoded
    for layer in range(depth):
        h = jax.nn.relu(jnp.add(jnp.matmul(h, p[f"W{layer}"]), p[f"b{layer}"]))
        if layer % 4 == 0 and layer > 0:
            h = jnp.concatenate([h, encoded], axis=-1)
    raw = jnp.reshape(jnp.add(jnp.matmul(h, p[f"W{depth}"]), p[f"b{depth}"]), (rays, samples, 4))
    sigma = jax.nn.relu(raw[..., 3])
    rgb = jax.nn.sigmoid(raw[..., 0:3])
    sd = jnp.multiply(sigma, i["deltas"])
    alpha = jnp.subtract(1.0, jnp.exp(jnp.negative(sd)))
    transmittance = jnp.exp(jnp.negative(jnp.subtract(jnp.cumsum(sd, axis=1), sd)))
    weights = jnp.reshape(jnp.multiply(alpha, transmittance), (rays, samples, 1))
    err = jnp.subtract(jnp.sum(jnp.multiply(weights, rgb), axis=1), i["target"])
    return jnp.mean(jnp.multiply(err, err))


def _gru(gi, h, U, H):
    gh = jnp.matmul(h, U)
    gate = lambda g, k: g[..., k * H : (k + 1) * H]  # noqa: E731
    r = jax.nn.sigmoid(jnp.add(gate(gi, 0), gate(gh, 0)))
    z = jax.nn.sigmoid(jnp.add(gate(gi, 1), gate(gh, 1)))
    n = jnp.tanh(jnp.add(gate(gi, 2), jnp.multiply(r, gate(gh, 2))))
    return jnp.add(n, jnp.multiply(z, jnp.subtract(h, n)))


def seq2seq_attention(p, i, c):
    E, H, A, B, Ts, Tt = (c[k] for k in ("E", "H", "A", "B", "T_src", "T_tgt"))
    x = jnp.take(p["src_emb"], i["src"], axis=0)
    gi_all = jnp.reshape(jnp.add(jnp.matmul(x, p["enc_W"]), p["enc_b"]), (Ts, B, 3 * H))
    h, states = i["h0"], []
    for t in range(Ts):
        h = _gru(gi_all[t], h, p["enc_U"], H)
        states.append(h)
    enc = jnp.stack(states, axis=1)
    keys = jnp.reshape(jnp.matmul(jnp.reshape(enc, (B * Ts, H)), p["att_Wk"]), (B, Ts, A))
    y = jnp.reshape(jnp.take(p["tgt_emb"], i["dec_in"], axis=0), (Tt, B, E))
    s, outputs = h, []
    for t in range(Tt):
        query = jnp.reshape(jnp.matmul(s, p["att_Wq"]), (B, 1, A))
        energy = jnp.tanh(jnp.add(keys, query))
        scores = jnp.reshape(jnp.matmul(jnp.reshape(energy, (B * Ts, A)), p["att_v"]), (B, Ts))
        weights = jax.nn.softmax(scores, axis=-1)
        context = jnp.reshape(jnp.matmul(jnp.reshape(weights, (B, 1, Ts)), enc), (B, H))
        gi = jnp.add(jnp.matmul(jnp.concatenate([y[t], context], axis=-1), p["dec_W"]), p["dec_b"])
        s = _gru(gi, s, p["dec_U"], H)
        outputs.append(s)
    states = jnp.reshape(jnp.stack(outputs, axis=0), (Tt * B, H))
    logits = jnp.add(jnp.matmul(states, p["out_W"]), p["out_b"])
    log_probs = jnp.subtract(logits, jax.nn.logsumexp(logits, axis=-1, keepdims=True))
    return jnp.negative(jnp.mean(jnp.take(jnp.reshape(log_probs, (-1,)), i["target_flat"], axis=0)))


def main():
    name, params, inputs, config = steady.arguments()
    loss_of = globals()[name]
    cpu = jax.devices("cpu")[0]
    params = {k: jax.device_put(v, cpu) for k, v in params.items()}
    inputs = {k: jax.device_put(v, cpu) for k, v in inputs.items()}

    def forward():
        return jax.block_until_ready(jax.vjp(lambda p: loss_of(p, inputs, config), params))

    def backward(state):
        value, vjp_fn = state
        return jax.block_until_ready(vjp_fn(jnp.ones_like(value)))

    if steady.mode() == "compiled":
        step = jax.jit(jax.value_and_grad(lambda p: loss_of(p, inputs, config)))
        figures = steady.measure_joint(lambda: jax.block_until_ready(step(params)))
        # XLA's own prediction of this program, read as the step peak counts: what the
        # step allocates above its resident arguments (outputs + temp - aliased)
        stats = step.lower(params).compile().memory_analysis()
        figures["predicted_bytes"] = (stats.output_size_in_bytes + stats.temp_size_in_bytes
                                      - stats.alias_size_in_bytes)
        steady.report(figures)
        return
    steady.report(steady.measure(forward, backward))


if __name__ == "__main__":
    main()
