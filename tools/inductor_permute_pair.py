"""shared_linear (small) compiled by Inductor, its backward peak with and without the
joint-graph pattern that folds permute(permute(x)) back to x.

Run it with a torch release's own Python (an environment `harness releases` built):

    MALLOC_MMAP_THRESHOLD_=32768 ~/.cache/gradmem/envs/torch-2.6.0-py3.11/bin/python \\
        tools/inductor_permute_pair.py [--without-pattern]

W is used K = 32 times as `x_k @ W.t()`. The backward of each use gives W's gradient as
permute(permute(mm)) (mm's gradient for a transposed operand, then t()'s), summed in a
chain of adds. Where Inductor folds the permute pair (`pointless_permute_pair`, new in
2.6.0), the chain is `add(acc, mm)`, which its post-grad pattern turns into one `addmm`
per use, accumulating into two (512, 512) buffers; where it does not (2.5.1, or with
--without-pattern), each mm gets a buffer of its own and one fused kernel sums all 32:
32 x 1 MiB alive at once. The process's resident high-water mark above the backward's
start is printed for 3 steady steps (as the sweep reads its step peak: VmHWM after
clear_refs; MALLOC_MMAP_THRESHOLD_ as the sweep sets it, so that freed buffers leave)."""

import argparse
import math
import os
import tempfile

# an empty Inductor cache: a cached graph would skip the passes this compares
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="permute-pair-inductor-")

import numpy as np  # noqa: E402
import torch  # noqa: E402

B, D, K = 16, 512, 32  # shared_linear's `small` size


def status_bytes(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def without_permute_pair():
    """Drop the pattern from Inductor's joint-graph patterns; how many entries went."""
    from torch._inductor.fx_passes import joint_graph

    handler = getattr(joint_graph, "pointless_permute_pair", None)
    if handler is None:
        raise SystemExit(f"torch {torch.__version__} has no pointless_permute_pair (added in 2.6.0)")
    dropped = 0
    for entries in joint_graph.patterns.patterns.values():
        kept = [entry for entry in entries if getattr(entry, "handler", None) is not handler]
        dropped += len(entries) - len(kept)
        entries[:] = kept
    return dropped


def loss(W, b, x):
    per_use = [(torch.tanh(x[k] @ W.t() + b) ** 2).mean() for k in range(K)]
    return torch.stack(per_use).sum()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--without-pattern", action="store_true",
                        help="drop Inductor's pointless_permute_pair before compiling")
    args = parser.parse_args()
    torch.set_num_threads(2)
    label = "on"
    if args.without_pattern:
        label = f"off ({without_permute_pair()} pattern entry dropped)"
    rng = np.random.default_rng(0)
    W = torch.tensor((0.9 / math.sqrt(D) * rng.standard_normal((D, D))).astype(np.float32), requires_grad=True)
    b = torch.tensor((0.1 * rng.standard_normal(D)).astype(np.float32), requires_grad=True)
    x = torch.tensor(rng.standard_normal((K, B, D)).astype(np.float32))
    step = torch.compile(loss, dynamic=False)
    for number in range(4):  # the first compiles
        W.grad = b.grad = None
        value = step(W, b, x)
        start = status_bytes("VmRSS")
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # reset VmHWM to the current RSS
        value.backward()
        peak = status_bytes("VmHWM") - start
        if number:
            print(f"torch {torch.__version__}, pointless_permute_pair {label}: backward peak {peak / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
