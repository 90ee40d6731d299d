"""One steady training step of a workload in TensorFlow eager (GradientTape), measured
without the harness (steady.py says how). The workloads are written here again with
tf.*, op for op as harness/workloads/ computes them through the TensorFlow adapter
(NCHW data: conv and pooling transpose to NHWC, which TF's CPU kernels need)."""

import steady

steady.ensure_environment()

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(int(steady.THREADS))
tf.config.threading.set_inter_op_parallelism_threads(int(steady.THREADS))


def chained_dot(p, i, c):
    z = i["z"]
    for _ in range(c["L"]):
        z = tf.linalg.matmul(p["x"], z)
    return tf.reduce_sum(z)


def rnn_fanout(p, i, c):
    h = i["x"]
    for _ in range(c["n"]):
        h = tf.math.tanh(tf.linalg.matmul(h, p["W"]) + p["b"])
    logit = tf.linalg.matmul(h, p["Wout"]) + p["bout"]
    return tf.reduce_sum(logit + tf.math.log(tf.math.exp(-logit) + 1.0) - i["label"] * logit)


def _conv(p, name, x, padding="SAME"):
    nhwc = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), tf.transpose(p[f"{name}_w"], [2, 3, 1, 0]),
                        strides=1, padding=padding)
    return tf.transpose(nhwc, [0, 3, 1, 2]) + tf.reshape(p[f"{name}_b"], [1, -1, 1, 1])


def _block(p, prefix, x):
    return tf.nn.relu(_conv(p, f"{prefix}b", tf.nn.relu(_conv(p, f"{prefix}a", x))))


def _max_pool(x):
    nhwc = tf.nn.max_pool2d(tf.transpose(x, [0, 2, 3, 1]), ksize=2, strides=2, padding="VALID")
    return tf.transpose(nhwc, [0, 3, 1, 2])


def unet(p, i, c):
    levels, skips, x = c["levels"], [], i["image"]
    for level in range(levels):
        x = _block(p, f"enc{level}", x)
        skips.append(x)
        x = _max_pool(x)
    x = _block(p, f"enc{levels}", x)
    for level in reversed(range(levels)):
        up = _conv(p, f"up{level}", tf.repeat(tf.repeat(x, 2, axis=2), 2, axis=3))
        x = _block(p, f"dec{level}", tf.concat([up, skips[level]], axis=1))
    logits = _conv(p, "out", x, padding="VALID")
    log_probs = logits - tf.reduce_logsumexp(logits, axis=1, keepdims=True)
    return -tf.reduce_mean(tf.reduce_sum(i["labels"] * log_probs, axis=1))


def tiny_nerf(p, i, c):
    rays, samples, depth = c["rays"], c["samples"], c["depth"]
    x = i["points"]
    features = [x]
    for k in range(c["freqs"]):
        scaled = x * float(2**k)
        features += [tf.math.sin(scaled), tf.math.cos(scaled)]
    encoded = tf.concat(features, axis=-1)
    h = encoded
    for layer in range(depth):
        h = tf.nn.relu(tf.linalg.matmul(h, p[f"W{layer}"]) + p[f"b{layer}"])
        if layer % 4 == 0 and layer > 0:
            h = tf.concat([h, encoded], axis=-1)
    raw = tf.reshape(tf.linalg.matmul(h, p[f"W{depth}"]) + p[f"b{depth}"], [rays, samples, 4])
    sigma = tf.nn.relu(raw[..., 3])
    rgb = tf.math.sigmoid(raw[..., 0:3])
    sd = sigma * i["deltas"]
    alpha = 1.0 - tf.math.exp(-sd)
    transmittance = tf.math.exp(-(tf.math.cumsum(sd, axis=1) - sd))
    weights = tf.reshape(alpha * transmittance, [rays, samples, 1])
    err = tf.reduce_sum(weights * rgb, axis=1) - i["target"]
    return tf.reduce_mean(err * err)


def _gru(gi, h, U, H):
    gh = tf.linalg.matmul(h, U)
    r = tf.math.sigmoid(gi[..., 0:H] + gh[..., 0:H])
    z = tf.math.sigmoid(gi[..., H : 2 * H] + gh[..., H : 2 * H])
    n = tf.math.tanh(gi[..., 2 * H : 3 * H] + r * gh[..., 2 * H : 3 * H])
    return n + z * (h - n)


def seq2seq_attention(p, i, c):
    E, H, A, B, Ts, Tt = (c[k] for k in ("E", "H", "A", "B", "T_src", "T_tgt"))
    x = tf.gather(p["src_emb"], i["src"], axis=0)
    gi_all = tf.reshape(tf.linalg.matmul(x, p["enc_W"]) + p["enc_b"], [Ts, B, 3 * H])
    h, states = i["h0"], []
    for t in range(Ts):
        h = _gru(gi_all[t], h, p["enc_U"], H)
        states.append(h)
    enc = tf.stack(states, axis=1)
    keys = tf.reshape(tf.linalg.matmul(tf.reshape(enc, [B * Ts, H]), p["att_Wk"]), [B, Ts, A])
    y = tf.reshape(tf.gather(p["tgt_emb"], i["dec_in"], axis=0), [Tt, B, E])
    s, outputs = h, []
    for t in range(Tt):
        query = tf.reshape(tf.linalg.matmul(s, p["att_Wq"]), [B, 1, A])
        energy = tf.math.tanh(keys + query)
        scores = tf.reshape(tf.linalg.matmul(tf.reshape(energy, [B * Ts, A]), p["att_v"]), [B, Ts])
        weights = tf.nn.softmax(scores, axis=-1)
        context = tf.reshape(tf.linalg.matmul(tf.reshape(weights, [B, 1, Ts]), enc), [B, H])
        gi = tf.linalg.matmul(tf.concat([y[t], context], axis=-1), p["dec_W"]) + p["dec_b"]
        s = _gru(gi, s, p["dec_U"], H)
        outputs.append(s)
    states = tf.reshape(tf.stack(outputs, axis=0), [Tt * B, H])
    logits = tf.linalg.matmul(states, p["out_W"]) + p["out_b"]
    log_probs = logits - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    return -tf.reduce_mean(tf.gather(tf.reshape(log_probs, [-1]), i["target_flat"], axis=0))


def main():
    name, params, inputs, config = steady.arguments()
    loss_of = globals()[name]
    with tf.device("/CPU:0"):
        params = {k: tf.identity(tf.constant(v)) for k, v in params.items()}
        inputs = {k: tf.identity(tf.constant(v)) for k, v in inputs.items()}

    def forward():
        tape = tf.GradientTape()
        with tape:
            tape.watch(params)
            loss = loss_of(params, inputs, config)
        return loss, tape

    def backward(state):
        loss, tape = state
        grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return {k: tf.convert_to_tensor(g) for k, g in grads.items()}

    if steady.mode() == "compiled":  # one tf.function around the tape step, as TF users write it
        @tf.function
        def step(params):
            with tf.GradientTape() as tape:
                tape.watch(params)
                loss = loss_of(params, inputs, config)
            grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            return loss, {k: tf.convert_to_tensor(g) for k, g in grads.items()}

        steady.report(steady.measure_joint(lambda: step(params)))
        return
    steady.report(steady.measure(forward, backward))


if __name__ == "__main__":
    main()
