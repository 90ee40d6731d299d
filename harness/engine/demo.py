"""The engine's headline figures, reproducibly: `python -m harness.engine` (or .demo).

1. Chained dot (HIPS autograd #219), the `chained_dot` workload at size small
   (D=500, L=50) in float64: the ledger's peak, tracemalloc's peak over the same call,
   and the bound L*D*D*8 bytes (the products any store-everything engine must keep).
2. One Linear reused K times (PyTorch PR #4746), W^T taken at each use: ledger peaks
   under the heap, bfs and dfs orders, for the `shared_linear` workload (the K uses
   side by side, size small: B=16, D=512, K=32, float32), where BFS reaches all K
   matmuls before any transpose, and for the same Linear used as a chain
   (h_k = linear(h_{k-1})), where every order holds one pending W^T gradient.

Each figure is the median of `--repeats` runs (3 by default).
"""

import argparse
import statistics
import time

from harness import cli_options
from harness.engine import ORDERS, Ledger, ops, value_and_grad
from harness.engine.testing import tracemalloc_peak
from harness.workloads import build


def chained_dot_figures(size="small", dtype="float64", repeats=3):
    problem = build("chained_dot", size, dtype)
    loss = lambda params, inputs: problem.loss(ops, params, inputs)
    ledger_peaks, traced_peaks, times = [], [], []
    for _ in range(repeats):
        ledger = Ledger()
        _, traced = tracemalloc_peak(value_and_grad(loss, ledger=ledger), problem.params, problem.inputs)
        ledger_peaks.append(ledger.peak_bytes)
        traced_peaks.append(traced)
        start = time.perf_counter()
        value_and_grad(loss)(problem.params, problem.inputs)
        times.append(time.perf_counter() - start)
    return {
        "ledger_peak_bytes": statistics.median(ledger_peaks),
        "tracemalloc_peak_bytes": statistics.median(traced_peaks),
        "bound_bytes": problem.bound_bytes,
        "time_s": statistics.median(times),
    }


def chain_loss(ops, params, inputs, K):
    """The shared_linear Linear used as a chain, h_k = tanh(h_{k-1} @ W^T + b)."""
    W, b = params["W"], params["b"]
    h = ops.getitem(inputs["x"], 0)
    for _ in range(K):
        h = ops.tanh(ops.add(ops.matmul(h, ops.permute_dims(W, (1, 0))), b))
    return ops.mean(ops.mul(h, h))


MODELS = ("side by side (shared_linear)", "chain")


def order_figures(size="small", dtype="float32", repeats=3):
    problem = build("shared_linear", size, dtype)
    K, B, D = problem.inputs["x"].shape
    losses = {
        MODELS[0]: lambda p, i: problem.loss(ops, p, i),
        MODELS[1]: lambda p, i: chain_loss(ops, p, i, K),
    }
    figures = {}
    for name, loss in losses.items():
        for order in ORDERS:
            peaks = []
            for _ in range(repeats):
                ledger = Ledger()
                value_and_grad(loss, order=order, ledger=ledger)(problem.params, problem.inputs)
                peaks.append(ledger.peak_bytes)
            figures[name, order] = statistics.median(peaks)
    return {"B": B, "D": D, "K": K, "dtype": dtype, "peaks": figures}


def _cfg(workload, size):
    from harness.workloads import get

    return get(workload).SIZES[size]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m harness.engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    cli_options.add_axes(parser, size="small", single=("size",))
    args = parser.parse_args(argv)
    mib = lambda n: f"{n / 2**20:9.3f} MiB ({int(n):,} B)"

    c = chained_dot_figures(args.size, "float64", args.repeats)
    cfg = _cfg("chained_dot", args.size)
    print(f"chained dot, D={cfg['D']} L={cfg['L']} float64 (median of {args.repeats}):")
    print(f"  ledger peak      {mib(c['ledger_peak_bytes'])}  = {c['ledger_peak_bytes'] / c['bound_bytes']:.4f} x bound")
    print(f"  tracemalloc peak {mib(c['tracemalloc_peak_bytes'])}  = {c['tracemalloc_peak_bytes'] / c['bound_bytes']:.4f} x bound")
    print(f"  bound L*D*D*8    {mib(c['bound_bytes'])}")
    print(f"  time (no ledger) {c['time_s']:9.3f} s")

    o = order_figures(args.size, "float32", args.repeats)
    print(f"\none Linear reused K={o['K']} times, B={o['B']} D={o['D']} {o['dtype']}, ledger peak by order (median of {args.repeats}):")
    for name in MODELS:
        row = "  ".join(f"{order} {mib(o['peaks'][name, order])}" for order in ORDERS)
        print(f"  {name:29s} {row}")


if __name__ == "__main__":
    main()
