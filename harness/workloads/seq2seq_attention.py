"""Sequence to sequence with attention: GRU encoder, additive-attention GRU decoder.

From the PyTorch forum thread "High GPU memory usage problem" (discuss.pytorch.org
/t/34694): an attention seq2seq model ported from Theano used ~2 GB in Theano and
~5 GB in PyTorch; its per-phase dumps show max_allocated 2154 MB after the forward,
2566 MB after the loss, 3482 MB after backward. The model: embeddings of 500, hidden
1000, attention 1000, a 30000-word vocabulary, batches of 80 sentences of length 50:
that is ``paper``.

Here: source and target embeddings (``take``); a GRU encoder over the source; a GRU
decoder fed, with teacher forcing, the previous target word and the context of
Bahdanau's additive attention ``v . tanh(W_k enc_j + W_q s_{t-1})`` over the encoder
states; logits ``s_t @ W_out + b_out`` over the vocabulary; cross-entropy as
``-mean(take(logits - logsumexp(logits), targets))`` on the flattened log-probs, the
targets' flat indices computed in ``init`` (no one-hot of the vocabulary). GRU cells
follow PyTorch's gate equations (r, z, n; n = tanh(x W_n + r * (h U_n))); one bias per
cell, on the input side. The encoder is one-directional (Bahdanau's is bidirectional)
to keep the step count of the sizes equal to their sequence length; the decoder starts
from the encoder's last state.
"""

import math

import numpy as np

from harness.workloads import itemsize

SOURCE = "PyTorch forum 'High GPU memory usage problem' (seq2seq + attention)"
STRESSES = "GRU encoder, attention over every source state at every step, big vocabulary"
SEGMENTS = ""  # no checkpoint or chain: remat strategies do not apply
SIZES = {
    "tiny": {"E": 8, "H": 12, "A": 10, "V": 50, "B": 3, "T_src": 5, "T_tgt": 4},
    "small": {"E": 64, "H": 128, "A": 128, "V": 2000, "B": 16, "T_src": 12, "T_tgt": 12},
    "paper": {"E": 500, "H": 1000, "A": 1000, "V": 30000, "B": 80, "T_src": 50, "T_tgt": 50},
}
BATCH_AXIS = "B"  # the sentence pairs of the batch
BOS = 0  # the decoder's first input word


def init(rng, cfg, dtype):
    c = cfg
    E, H, A, V, B = c["E"], c["H"], c["A"], c["V"], c["B"]

    def dense(fan_in, fan_out):
        return rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)

    params = {
        "src_emb": rng.standard_normal((V, E)),
        "tgt_emb": rng.standard_normal((V, E)),
        "enc_W": dense(E, 3 * H),
        "enc_U": dense(H, 3 * H),
        "enc_b": 0.1 * rng.standard_normal(3 * H),
        "att_Wk": dense(H, A),
        "att_Wq": dense(H, A),
        "att_v": dense(A, 1),
        "dec_W": dense(E + H, 3 * H),
        "dec_U": dense(H, 3 * H),
        "dec_b": 0.1 * rng.standard_normal(3 * H),
        "out_W": dense(H, V),
        "out_b": 0.1 * rng.standard_normal(V),
    }
    params = {k: v.astype(dtype) for k, v in params.items()}
    # Words 1 .. V-1 (0 is BOS). Time-major (T, B), flattened: row t*B + b.
    src = rng.integers(1, V, size=(c["T_src"], B))
    tgt = rng.integers(1, V, size=(c["T_tgt"], B))
    dec_in = np.concatenate([np.full((1, B), BOS), tgt[:-1]], axis=0)
    inputs = {
        "src": src.reshape(-1),
        "dec_in": dec_in.reshape(-1),
        # index of (row, target word) in the flattened (T_tgt * B, V) log-probs
        "target_flat": np.arange(tgt.size) * V + tgt.reshape(-1),
        "h0": np.zeros((B, H), dtype=dtype),  # the encoder's initial state
    }
    return params, inputs


def _gru(ops, gi, h, U, H):
    """One GRU step from the input-side pre-activations gi (B, 3H) and state h (B, H)."""
    gh = ops.matmul(h, U)
    gate = lambda g, k: ops.getitem(g, (Ellipsis, slice(k * H, (k + 1) * H)))
    r = ops.sigmoid(ops.add(gate(gi, 0), gate(gh, 0)))
    z = ops.sigmoid(ops.add(gate(gi, 1), gate(gh, 1)))
    n = ops.tanh(ops.add(gate(gi, 2), ops.mul(r, gate(gh, 2))))
    return ops.add(n, ops.mul(z, ops.sub(h, n)))  # (1 - z) * n + z * h


def loss(ops, params, inputs, cfg):
    E, H, A, V, B = cfg["E"], cfg["H"], cfg["A"], cfg["V"], cfg["B"]
    Ts, Tt = cfg["T_src"], cfg["T_tgt"]
    p = params

    # encoder: one matmul for every step's input side, then the recurrence
    x = ops.take(p["src_emb"], inputs["src"], axis=0)  # (Ts*B, E)
    gi_all = ops.reshape(ops.add(ops.matmul(x, p["enc_W"]), p["enc_b"]), (Ts, B, 3 * H))
    h = inputs["h0"]  # zeros (B, H)
    states = []
    for t in range(Ts):
        h = _gru(ops, ops.getitem(gi_all, t), h, p["enc_U"], H)
        states.append(h)
    enc = ops.stack(states, axis=1)  # (B, Ts, H)
    keys = ops.reshape(ops.matmul(ops.reshape(enc, (B * Ts, H)), p["att_Wk"]), (B, Ts, A))

    # decoder with teacher forcing
    y = ops.reshape(ops.take(p["tgt_emb"], inputs["dec_in"], axis=0), (Tt, B, E))
    s = h
    outputs = []
    for t in range(Tt):
        query = ops.reshape(ops.matmul(s, p["att_Wq"]), (B, 1, A))
        energy = ops.tanh(ops.add(keys, query))  # (B, Ts, A)
        scores = ops.reshape(ops.matmul(ops.reshape(energy, (B * Ts, A)), p["att_v"]), (B, Ts))
        weights = ops.softmax(scores, axis=-1)
        context = ops.reshape(ops.matmul(ops.reshape(weights, (B, 1, Ts)), enc), (B, H))
        step_in = ops.concat([ops.getitem(y, t), context], axis=-1)  # (B, E + H)
        gi = ops.add(ops.matmul(step_in, p["dec_W"]), p["dec_b"])
        s = _gru(ops, gi, s, p["dec_U"], H)
        outputs.append(s)

    states = ops.reshape(ops.stack(outputs, axis=0), (Tt * B, H))
    logits = ops.add(ops.matmul(states, p["out_W"]), p["out_b"])  # (Tt*B, V)
    log_probs = ops.sub(logits, ops.logsumexp(logits, axis=-1, keepdims=True))
    picked = ops.take(ops.reshape(log_probs, (-1,)), inputs["target_flat"], axis=0)
    return ops.neg(ops.mean(picked))


def bound_bytes(cfg, dtype):
    # What the VJPs need, all live at the end of the forward pass (one count per tensor):
    # - encoder: the embedded source (Ts*B, E), input of the matmul with enc_W; per
    #   step the state h_t (B, H) (next step's recurrent matmul input, attention value),
    #   the three gates r, z, n (B, H) each, which the GRU's VJP needs (whether as
    #   activations or as same-sized pre-activations), and the recurrent part of n's
    #   pre-activation, gh_n = (h U)[2H:3H]: n = tanh(gi_n + r * gh_n), so r's gradient
    #   is dn (1 - n^2) gh_n, and gh_n cannot be had from r, z, n and h (torch's fused
    #   GRU cell keeps it in its workspace too): 5 B H per step;
    # - decoder, per step: the matmul input [y_t, context_t] (B, E + H), the tanh
    #   energies (B, Ts, A) (tanh's VJP and att_v's gradient), the attention weights
    #   (B, Ts) (softmax's VJP and the context's), the state, three gates and gh_n (5 B H);
    # - the logits (Tt*B, V): log-softmax's VJP needs them (softmax = exp(logits - lse)).
    # Left out: the attention keys (only added to), the stacked copies of the states,
    # anything (B,)-sized or smaller. Every term has one factor B: per sentence pair,
    # the same sum with B = 1.
    c = cfg
    E, H, A, V, B, Ts, Tt = (c[k] for k in ("E", "H", "A", "V", "B", "T_src", "T_tgt"))
    encoder = Ts * B * E + Ts * 5 * B * H
    decoder = Tt * (B * (E + H) + B * Ts * A + B * Ts + 5 * B * H)
    return (encoder + decoder + Tt * B * V) * itemsize(dtype)
