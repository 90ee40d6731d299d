"""One steady training step of a workload in PyTorch eager, measured without the
harness (steady.py says how). The workloads are written here again, in plain torch,
op for op as harness/workloads/ computes them through the torch adapter."""

import steady

steady.ensure_environment()

import torch  # noqa: E402

F = torch.nn.functional
torch.set_num_threads(int(steady.THREADS))
torch.set_num_interop_threads(int(steady.THREADS))


def chained_dot(p, i, c):
    z = i["z"]
    for _ in range(c["L"]):
        z = torch.matmul(p["x"], z)
    return torch.sum(z)


def rnn_fanout(p, i, c):
    h = i["x"]
    for _ in range(c["n"]):
        h = torch.tanh(torch.matmul(h, p["W"]) + p["b"])
    logit = torch.matmul(h, p["Wout"]) + p["bout"]
    return torch.sum(logit + torch.log(torch.exp(-logit) + 1.0) - i["label"] * logit)


def _conv(p, name, x, padding=1):
    return F.conv2d(x, p[f"{name}_w"], padding=padding) + p[f"{name}_b"].reshape(1, -1, 1, 1)


def _block(p, prefix, x):
    return torch.relu(_conv(p, f"{prefix}b", torch.relu(_conv(p, f"{prefix}a", x))))


def unet(p, i, c):
    levels, skips, x = c["levels"], [], i["image"]
    for level in range(levels):
        x = _block(p, f"enc{level}", x)
        skips.append(x)
        x = F.max_pool2d(x, kernel_size=2, stride=2)
    x = _block(p, f"enc{levels}", x)
    for level in reversed(range(levels)):
        up = _conv(p, f"up{level}", F.interpolate(x, scale_factor=2, mode="nearest"))
        x = _block(p, f"dec{level}", torch.cat([up, skips[level]], dim=1))
    logits = _conv(p, "out", x, padding=0)
    log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -torch.mean(torch.sum(i["labels"] * log_probs, dim=1))


def tiny_nerf(p, i, c):
    rays, samples, depth = c["rays"], c["samples"], c["depth"]
    x = i["points"]
    features = [x]
    for k in range(c["freqs"]):
        scaled = x * float(2**k)
        features += [torch.sin(scaled), torch.cos(scaled)]
    encoded = torch.cat(features, dim=-1)
    h = encoded
    for layer in range(depth):
        h = torch.relu(torch.matmul(h, p[f"W{layer}"]) + p[f"b{layer}"])
        if layer % 4 == 0 and layer > 0:
            h = torch.cat([h, encoded], dim=-1)
    raw = torch.reshape(torch.matmul(h, p[f"W{depth}"]) + p[f"b{depth}"], (rays, samples, 4))
    sigma = torch.relu(raw[..., 3])
    rgb = torch.sigmoid(raw[..., 0:3])
    sd = sigma * i["deltas"]
    alpha = 1.0 - torch.exp(-sd)
    transmittance = torch.exp(-(torch.cumsum(sd, dim=1) - sd))
    weights = torch.reshape(alpha * transmittance, (rays, samples, 1))
    err = torch.sum(weights * rgb, dim=1) - i["target"]
    return torch.mean(err * err)


def _gru(gi, h, U, H):
    gh = torch.matmul(h, U)
    r = torch.sigmoid(gi[..., 0:H] + gh[..., 0:H])
    z = torch.sigmoid(gi[..., H : 2 * H] + gh[..., H : 2 * H])
    n = torch.tanh(gi[..., 2 * H : 3 * H] + r * gh[..., 2 * H : 3 * H])
    return n + z * (h - n)


def seq2seq_attention(p, i, c):
    E, H, A, B, Ts, Tt = (c[k] for k in ("E", "H", "A", "B", "T_src", "T_tgt"))
    x = F.embedding(i["src"], p["src_emb"])
    gi_all = torch.reshape(torch.matmul(x, p["enc_W"]) + p["enc_b"], (Ts, B, 3 * H))
    h, states = i["h0"], []
    for t in range(Ts):
        h = _gru(gi_all[t], h, p["enc_U"], H)
        states.append(h)
    enc = torch.stack(states, dim=1)
    keys = torch.reshape(torch.matmul(torch.reshape(enc, (B * Ts, H)), p["att_Wk"]), (B, Ts, A))
    y = torch.reshape(F.embedding(i["dec_in"], p["tgt_emb"]), (Tt, B, E))
    s, outputs = h, []
    for t in range(Tt):
        query = torch.reshape(torch.matmul(s, p["att_Wq"]), (B, 1, A))
        energy = torch.tanh(keys + query)
        scores = torch.reshape(torch.matmul(torch.reshape(energy, (B * Ts, A)), p["att_v"]), (B, Ts))
        weights = torch.softmax(scores, dim=-1)
        context = torch.reshape(torch.matmul(torch.reshape(weights, (B, 1, Ts)), enc), (B, H))
        gi = torch.matmul(torch.cat([y[t], context], dim=-1), p["dec_W"]) + p["dec_b"]
        s = _gru(gi, s, p["dec_U"], H)
        outputs.append(s)
    logits = torch.matmul(torch.reshape(torch.stack(outputs, dim=0), (Tt * B, H)), p["out_W"]) + p["out_b"]
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    picked = torch.index_select(torch.reshape(log_probs, (-1,)), 0, i["target_flat"])
    return -torch.mean(picked)


def main():
    name, params, inputs, config = steady.arguments()
    loss_of = globals()[name]
    params = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in params.items()}
    inputs = {k: torch.from_numpy(v.copy()) for k, v in inputs.items()}

    # compiled: torch.compile of the loss (Inductor, static shapes), then the gradient,
    # as torch users write it; AOTAutograd runs forward and backward as two programs
    loss_fn = loss_of if steady.mode() == "eager" else torch.compile(loss_of, dynamic=False)

    def forward():
        with torch.enable_grad():
            return loss_fn(params, inputs, config)

    def backward(loss):
        return torch.autograd.grad(loss, list(params.values()))

    steady.report(steady.measure(forward, backward))


if __name__ == "__main__":
    main()
