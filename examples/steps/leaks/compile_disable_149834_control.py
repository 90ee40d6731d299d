"""pytorch#149834's control: the same code without `@torch.compiler.disable` on Inner.

The report's code as its author wrote it (torch 2.6.0, Python 3.11.8, on CUDA): an
embedding, then two `Outer` modules whose forward is compiled (`@torch.compile()`) and
calls an `Inner` whose forward is `@torch.compiler.disable`, all under
`torch.inference_mode()`. The reporter saw `torch.cuda.memory_allocated()` rise by
65,536 bytes every iteration, one (1, 32, 512) float32 activation (32 x 512 x 4 bytes),
without end; without either decorator it did not. One gradmem step is one iteration of
the report's loop, `m(xs)`. The device is the cell's: no GPU here, so it runs on CPU
(where the bytes are the host's own pages); `small` is the report's sizes. This file is
the control: the reporter's code with the `disable` decorator taken off, which the
report says does not leak.

    python -m harness run --workload examples/steps/leaks/compile_disable_149834_control.py \
        --framework torch==2.6.0 --torch-index pypi --size small --out r.jsonl

docs/seeds.md, "Leak reports", says what was found.
"""

import torch
import torch.nn as nn

FRAMEWORK = "torch"
SOURCE = "github.com/pytorch/pytorch/issues/149834 (koute): the report's code without @torch.compiler.disable (its control)"
# V: embedding rows, D: its width, T: the tokens of the one input row; the report's
# leak is one (1, T, D) activation a step: T * D * 4 bytes (65,536 at small)
SIZES = {
    "tiny": {"V": 16, "D": 64, "T": 8},
    "small": {"V": 64, "D": 512, "T": 32},
}


class Inner(nn.Module):
    def forward(self, x, x0):
        return x


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    @torch.compile()
    def forward(self, x, x0):
        return x + self.inner(x, x0)


class Model(nn.Module):
    def __init__(self, V, D):
        super().__init__()

        self.e = nn.Embedding(V, D)
        self.a = Outer()
        self.b = Outer()

    def forward(self, x):
        x = self.e(x)
        return self.b(self.a(x, x), x)


def setup(cfg):
    torch.manual_seed(0)
    with torch.inference_mode():  # as the report: the model and input made under inference mode
        m = Model(cfg["V"], cfg["D"]).to(cfg["device"], getattr(torch, cfg["dtype"]))
        xs = torch.zeros((1, cfg["T"]), device=cfg["device"], dtype=torch.long)
    return {"m": m, "xs": xs}


def step(state):
    with torch.inference_mode():
        state["m"](state["xs"])  # the report discards the output


def sync(state):
    if state["xs"].is_cuda:
        torch.cuda.synchronize()
