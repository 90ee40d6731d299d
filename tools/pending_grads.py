#!/usr/bin/env python
"""When does a framework's backward consume the per-use gradients of W^T on shared_linear?

    python tools/pending_grads.py torch|paddle [--size small]

shared_linear (harness/workloads/shared_linear.py) takes W^T afresh at each of its K
uses; a backward that runs every use's matmul VJP before the first transpose VJP holds
K (D, D) gradients at once (PyTorch PR #4746). This script builds the same model with
the framework's own calls, hooks each per-use W^T (a hook fires when that gradient is
complete and about to be consumed) and prints the resident bytes at each firing above
the RSS before the forward: flat near the activations when each gradient is consumed
as it arrives, ~K x D x D x 4 bytes from the first firing when all were made first.
Evidence for docs/diff.md; not part of the harness.
"""

import argparse

import numpy as np

from harness import workloads


def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))


def model(name):
    if name == "torch":
        import torch

        def tensor(a, grad=False):
            return torch.tensor(a, requires_grad=grad)

        return tensor, lambda W: W.t(), torch.matmul, torch.tanh, torch.stack, torch.sum, \
            lambda loss, params: torch.autograd.grad(loss, params)
    import paddle

    def tensor(a, grad=False):
        t = paddle.to_tensor(a)
        t.stop_gradient = not grad
        return t

    return tensor, lambda W: paddle.transpose(W, [1, 0]), paddle.matmul, paddle.tanh, paddle.stack, paddle.sum, \
        lambda loss, params: paddle.grad(loss, params)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("framework", choices=("torch", "paddle"))
    parser.add_argument("--size", default="small", choices=("tiny", "small", "paper"))
    args = parser.parse_args()
    cfg = workloads.get("shared_linear").SIZES[args.size]
    B, D, K = cfg["B"], cfg["D"], cfg["K"]
    tensor, transpose, matmul, tanh, stack, total, grad = model(args.framework)
    rng = np.random.default_rng(0)
    W = tensor((0.9 / np.sqrt(D) * rng.standard_normal((D, D))).astype("float32"), True)
    b = tensor((0.1 * rng.standard_normal(D)).astype("float32"), True)
    xs = [tensor(rng.standard_normal((B, D)).astype("float32")) for _ in range(K)]
    seen = []

    def step(hooked):
        hs = []
        for x in xs:
            Wt = transpose(W)
            if hooked:
                Wt.register_hook(lambda g: seen.append(rss()) or g)
            hs.append(tanh(matmul(x, Wt) + b))
        return grad(total(stack(hs)), [W, b])

    step(False)  # warm-up: the allocator and kernels are set up
    base = rss()
    step(True)
    mib = [round((r - base) / 2**20, 1) for r in seen]
    print(f"{args.framework} shared_linear {args.size} (K={K}, one W^T gradient = {D * D * 4 / 2**20:g} MiB): "
          f"RSS above the forward's start at each W^T gradient's hook, MiB: {mib}")


if __name__ == "__main__":
    main()
