#!/usr/bin/env python
"""Does the harness's step peak agree with the independent scripts beside this file?

For each framework and workload: the harness's memory pass (a fresh worker, as in a
sweep) and the framework's independent script (no `harness` import) measure the same
steady step of the same arrays; printed side by side with their ratio.

    .venv/bin/python tools/independent/agreement.py --size small
    .venv/bin/python tools/independent/agreement.py --size tiny --frameworks torch --workloads unet

This driver imports the harness (to build the problem and run its worker); the scripts
it compares against do not.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = {"torch": "torch_step.py", "tensorflow": "tf_step.py", "jax": "jax_step.py", "autograd": "autograd_step.py",
           "mlx": "mlx_step.py"}
#: the workloads a script has, where it has fewer than WORKLOADS
SCRIPT_WORKLOADS = {"mlx": ("chained_dot", "rnn_fanout")}
WORKLOADS = ("chained_dot", "rnn_fanout", "unet", "tiny_nerf", "seq2seq_attention")


def independent_peak(framework, workload, size, dtype, workdir, mode="eager"):
    """The script's step peak figures ({forward, backward, total} and samples)."""
    from harness import workloads

    problem = workloads.build(workload, size, dtype)
    path = os.path.join(workdir, f"{workload}-{size}-{dtype}.npz")
    np.savez(path, **{f"p:{k}": v for k, v in problem.params.items()}, **{f"i:{k}": v for k, v in problem.inputs.items()})
    config = json.dumps(workloads.get(workload).SIZES[size])
    done = subprocess.run([sys.executable, os.path.join(HERE, SCRIPTS[framework]), workload, path, config, mode],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{SCRIPTS[framework]} {workload}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def harness_peak(framework, workload, size, dtype, workdir, mode="eager"):
    """The harness's memory pass of the cell: its result (step peak, retained...)."""
    from harness import frameworks
    from harness.sweep import environment
    from harness.sweep.worker_process import run_worker

    cell = {"workload": workload, "size": size, "dtype": dtype, "framework": framework,
            "mode": mode, "device": "cpu"}
    env, _ = environment.worker_environment(frameworks.get(framework), "memory")
    job = {"kind": "memory", "cell": cell, "seed": 0, "warmup": 1}
    outcome = run_worker(job, env, workdir, f"memory-{framework}-{mode}-{workload}-{size}", timeout_s=900)
    if not outcome.ok:
        raise RuntimeError(f"harness {framework} {workload}: {outcome.status} {outcome.message[-2000:]}")
    return outcome.result


def measure_both(framework, workload, size="tiny", dtype="float32", mode="eager"):
    """(the harness's memory-pass result, the script's figures) of one cell."""
    with tempfile.TemporaryDirectory(prefix="gradmem-agree-") as workdir:
        mine = harness_peak(framework, workload, size, dtype, workdir, mode)
        theirs = independent_peak(framework, workload, size, dtype, workdir, mode)
    return mine, theirs


def compare(framework, workload, size="tiny", dtype="float32", mode="eager"):
    """(harness step peak, independent step peak, harness retained) in bytes."""
    mine, theirs = measure_both(framework, workload, size, dtype, mode)
    return mine["peak_bytes"]["total"], theirs["peak_bytes"]["total"], mine["retained_bytes"]


def compare_prediction(workload, size="tiny", dtype="float32"):
    """(the harness record's JAX prediction, the script's own memory_analysis reading)
    of a compiled JAX cell, in bytes: the record's reading of XLA's plan, checked."""
    mine, theirs = measure_both("jax", workload, size, dtype, "compiled")
    return (mine.get("prediction") or {}).get("bytes"), theirs["predicted_bytes"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--frameworks", default=",".join(SCRIPTS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--modes", default="eager", help="eager,compiled (autograd has no compiled mode)")
    args = parser.parse_args(argv)
    chosen = [f for f in args.frameworks.split(",") if f]
    modes = [m for m in args.modes.split(",") if m]
    bad = [f for f in chosen if f not in SCRIPTS] + [w for w in args.workloads.split(",") if w not in WORKLOADS]
    bad += [m for m in modes if m not in ("eager", "compiled")]
    if bad:
        parser.error(f"unknown {', '.join(bad)}; frameworks: {', '.join(SCRIPTS)}; workloads: {', '.join(WORKLOADS)}; "
                     "modes: eager, compiled")
    print(f"{'framework':<11} {'mode':<9} {'workload':<18} {'harness MiB':>11} {'script MiB':>10} {'ratio':>6} "
          f"{'retained MiB':>12}")
    for framework in chosen:
        for mode in modes:
            if mode == "compiled" and framework == "autograd":
                continue  # autograd has no compiled mode
            for workload in args.workloads.split(","):
                if workload not in SCRIPT_WORKLOADS.get(framework, WORKLOADS):
                    continue  # the script does not write this workload
                mine, theirs, retained = compare(framework, workload, args.size, args.dtype, mode)
                print(f"{framework:<11} {mode:<9} {workload:<18} {mine / 2**20:>11.2f} {theirs / 2**20:>10.2f} "
                      f"{mine / theirs if theirs else float('nan'):>6.3f} {retained / 2**20:>12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
