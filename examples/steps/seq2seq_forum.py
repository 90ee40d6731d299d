"""The PyTorch forum's attention seq2seq with Adam ("High GPU memory usage problem",
discuss.pytorch.org/t/34694), written the way PyTorch users write it.

The post describes its model and loop, not its code (the code is not in the text
available here): an attention-based sequence-to-sequence model ported from Theano,
trained with Adam, its memory printed after zero_grad, the forward, the loss, backward
and the optimizer step. This is that model with torch.nn's own modules: embeddings
(nn.Embedding), a GRU encoder (nn.GRU, one call over the sequence), a decoder loop of
nn.GRUCell fed the previous target word and the context of Bahdanau's additive
attention (nn.Linear layers, softmax, torch.bmm), an output nn.Linear over the
vocabulary, nn.CrossEntropyLoss, torch.optim.Adam; one step is zero_grad, forward,
loss, backward, step. The sizes are the op-set workload's (harness/workloads/
seq2seq_attention.py: `small` E 64, H 128, A 128, V 2000, B 16, T 12; `paper` the
post's). What the op-set workload does differently (its GRU cells written with
matmuls, one bias per cell) and what that costs: docs/seeds.md.
"""

import torch
from torch import nn

FRAMEWORK = "torch"
SOURCE = "discuss.pytorch.org/t/34694 (T Qri): attention seq2seq, Adam; written with torch.nn modules"
SIZES = {
    "tiny": {"E": 8, "H": 12, "A": 10, "V": 50, "B": 3, "T_src": 5, "T_tgt": 4},
    "small": {"E": 64, "H": 128, "A": 128, "V": 2000, "B": 16, "T_src": 12, "T_tgt": 12},
    "paper": {"E": 500, "H": 1000, "A": 1000, "V": 30000, "B": 80, "T_src": 50, "T_tgt": 50},
}
BATCH_AXIS = "B"
BOS = 0


class Seq2Seq(nn.Module):
    def __init__(self, E, H, A, V):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(V, E), nn.Embedding(V, E)
        self.encoder = nn.GRU(E, H)
        self.att_k, self.att_q = nn.Linear(H, A, bias=False), nn.Linear(H, A, bias=False)
        self.att_v = nn.Linear(A, 1, bias=False)
        self.decoder = nn.GRUCell(E + H, H)
        self.out = nn.Linear(H, V)

    def forward(self, src, dec_in):
        enc, h = self.encoder(self.src_emb(src))  # (Ts, B, H), (1, B, H)
        enc = enc.transpose(0, 1)  # (B, Ts, H)
        keys = self.att_k(enc)  # (B, Ts, A)
        s, logits = h[0], []
        for y in self.tgt_emb(dec_in):  # teacher forcing: (B, E) per step
            scores = self.att_v(torch.tanh(keys + self.att_q(s).unsqueeze(1))).squeeze(-1)  # (B, Ts)
            context = torch.bmm(torch.softmax(scores, dim=-1).unsqueeze(1), enc).squeeze(1)  # (B, H)
            s = self.decoder(torch.cat([y, context], dim=-1), s)
            logits.append(self.out(s))
        return torch.stack(logits)  # (Tt, B, V)


def setup(cfg):
    torch.manual_seed(0)
    device, dtype = torch.device(cfg["device"]), getattr(torch, cfg["dtype"])
    E, H, A, V, B = (cfg[k] for k in ("E", "H", "A", "V", "B"))
    model = Seq2Seq(E, H, A, V).to(device, dtype)
    src = torch.randint(1, V, (cfg["T_src"], B), device=device)
    tgt = torch.randint(1, V, (cfg["T_tgt"], B), device=device)
    dec_in = torch.cat([torch.full((1, B), BOS, device=device), tgt[:-1]])
    return {"model": model, "optimizer": torch.optim.Adam(model.parameters(), lr=1e-3),
            "criterion": nn.CrossEntropyLoss(), "src": src, "dec_in": dec_in, "tgt": tgt}


def step(state):
    model, optimizer = state["model"], state["optimizer"]
    model.zero_grad()
    logits = model(state["src"], state["dec_in"])
    loss = state["criterion"](logits.reshape(-1, logits.shape[-1]), state["tgt"].reshape(-1))
    loss.backward()
    optimizer.step()
    return loss.detach()
