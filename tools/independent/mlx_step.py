"""One steady training step of a workload in MLX, measured without the harness and
without RSS: MLX's own allocator counters (``mx.reset_peak_memory()`` before the step,
``mx.get_peak_memory()`` after it, minus ``mx.get_active_memory()`` at its start), which
count the arrays a step allocates whether or not MLX's buffer cache would have served
them. The step is what MLX users write: ``mx.value_and_grad(loss)`` then one
``mx.eval(loss, grads)``; compiled = ``mx.compile`` of the value-and-grad function.
Workloads re-written with mlx.core, op for op as harness/workloads/ computes them
(chained_dot and rnn_fanout: the two whose MLX figures moved most when the buffer cache was turned off).

    python tools/independent/mlx_step.py WORKLOAD PROBLEM.npz CONFIG_JSON [eager|compiled]
"""

import json
import sys

import mlx.core as mx
import numpy as np


def chained_dot(p, i, c):
    z = i["z"]
    for _ in range(c["L"]):
        z = mx.matmul(p["x"], z)
    return mx.sum(z)


def rnn_fanout(p, i, c):
    h = i["x"]
    for _ in range(c["n"]):
        h = mx.tanh(mx.add(mx.matmul(h, p["W"]), p["b"]))
    logit = mx.add(mx.matmul(h, p["Wout"]), p["bout"])
    softplus_neg = mx.log(mx.add(mx.exp(mx.negative(logit)), 1.0))
    return mx.sum(mx.subtract(mx.add(logit, softplus_neg), mx.multiply(i["label"], logit)))


def main():
    workload, npz, config = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else "eager"
    if mode not in ("eager", "compiled"):
        sys.exit(f"mode must be eager or compiled, got {mode!r}")
    mx.set_default_device(mx.cpu)
    config = json.loads(config)
    with np.load(npz) as data:
        params = {k[2:]: mx.array(data[k]) for k in data.files if k.startswith("p:")}
        inputs = {k[2:]: mx.array(data[k]) for k in data.files if k.startswith("i:")}
    mx.eval(params, inputs)
    loss_of = globals()[workload]
    value_and_grad = mx.value_and_grad(lambda p: loss_of(p, inputs, config))
    if mode == "compiled":
        value_and_grad = mx.compile(value_and_grad)

    def step():
        loss, grads = value_and_grad(params)
        mx.eval(loss, grads)

    for _ in range(2):  # warm-up (compiles on the first call)
        step()
    samples = []
    for _ in range(3):
        start = mx.get_active_memory()
        mx.reset_peak_memory()
        step()
        samples.append({"total": mx.get_peak_memory() - start})
    median = sorted(samples, key=lambda s: s["total"])[1]
    print(json.dumps({"peak_bytes": median, "samples": samples}))


if __name__ == "__main__":
    main()
