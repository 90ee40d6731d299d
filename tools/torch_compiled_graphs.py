"""The forward and backward graphs torch.compile makes of a workload, as the harness's
compiled cell runs it: what AOTAutograd's partitioner saves between them (the
backward's inputs) and the order in which the backward frees them.

    python tools/torch_compiled_graphs.py transformer_block [--size small] > graphs.txt

Prints TORCH_LOGS=aot_graphs's output (torch's logger, on stderr) for one step of the
torch adapter's compiled `value_and_grad`, with torch's log prefix cut. Reading a
row that beats the reference engine: e.g. transformer_block's backward takes relu's
boolean mask (`le`) beside its output, so the output dies after W2's gradient, before
the (B, T, F) cotangent is made (docs/engine.md, "A fused program's floor")."""

import argparse
import os
import re
import sys

os.environ.setdefault("TORCH_LOGS", "aot_graphs")

import numpy as np  # noqa: E402

from harness import workloads  # noqa: E402
from harness.frameworks.torch import TorchAdapter  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=workloads.NAMES)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "paper"))
    args = parser.parse_args()
    workload = workloads.get(args.workload)
    cfg = workloads.config(args.workload, args.size, None)
    params, inputs = workload.init(np.random.default_rng(0), cfg, np.float32)
    adapter = TorchAdapter().load(mode="compiled")
    step = adapter.value_and_grad(lambda ops, p, i: workload.loss(ops, p, i, cfg), mode="compiled")
    # torch's logger writes to the stderr it found at import: read it back from a file
    log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"aot-graphs-{os.getpid()}.log")
    with open(log, "w") as sink:
        saved, sys.stderr = os.dup(2), sink
        os.dup2(sink.fileno(), 2)
        try:
            step(adapter.from_numpy(params), adapter.from_numpy(inputs))
        finally:
            os.dup2(saved, 2)
            sys.stderr = sys.__stderr__
    with open(log) as found:
        for line in found:
            print(re.sub(r"^I\d{4} [\d:.]+ \d+ \S+\] \[[^]]*\] \[__aot_graphs\] ?", "", line), end="")
    os.unlink(log)


if __name__ == "__main__":
    main()
