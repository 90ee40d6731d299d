#!/usr/bin/env python
"""Regenerate the figures of one section of docs/seeds.md (the reports gradmem's
workloads come from, each claim measured today).

    .venv/bin/python tools/seeds.py autograd219 --repo CHECKOUT_OF_HIPS_AUTOGRAD
    .venv/bin/python tools/seeds.py pr4746

autograd219: `harness bisect --repo` over autograd's first-parent commits from
3d018e8 (the thread's master, 5 May 2017) to 723e677 (11 July 2017), walked step by
step (after each first-bad commit the bisection starts again from it, until good and
bad no longer differ), then a memory pass of each step's two commits whose breakdown
names the category that moved. pr4746: shared_linear in the reference engine under
each backward order, and the rows above the bound, each with its RSS timeline read at
the phase marks (what is live when backward starts, and its peak).

Exit 2 for a bad section name or argument.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT)
from harness import cli_options, figures  # noqa: E402  (the checkout's harness)
from harness.sweep import outcome  # noqa: E402
from harness.units import MIB  # noqa: E402

PYTHON = sys.executable
AUTOGRAD_GOOD, AUTOGRAD_BAD = "3d018e8", "723e677"  # 5 May 2017 .. 11 July 2017


def _bisect(repo, workload, size, good, bad, metric):
    """(exit code, {first_bad, last_good, good_mib, bad_mib}, output) of one bisection."""
    command = [PYTHON, "-m", "harness", "bisect", "--workload", workload, "--framework", "autograd",
               "--repo", repo, "--good", good, "--bad", bad, "--size", size, "--metric", metric]
    done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True)
    text = done.stdout + done.stderr
    found = {}
    for key, pattern in (("first_bad", r"first bad commit: (\w+)"), ("last_good", r"last good commit: (\w+)")):
        match = re.search(pattern, text)
        if match:
            found[key] = match.group(1)
    match = re.search(r"good ([\d.]+) MiB -> bad ([\d.]+) MiB", text)
    if match:
        found["good_mib"], found["bad_mib"] = float(match.group(1)), float(match.group(2))
    return done.returncode, found, text


def walk_steps(repo, workload, size, good, bad, metric="backward"):
    """Every commit that moved `metric` by more than bisect's threshold, oldest first."""
    steps = []
    while True:
        code, found, text = _bisect(repo, workload, size, good, bad, metric)
        print(text.rstrip(), flush=True)
        if code == 1:  # good and bad no longer differ: no step left
            return steps
        if code != 0 or "first_bad" not in found:
            raise RuntimeError(f"bisect exited {code}:\n{text[-2000:]}")
        steps.append(found)
        good = found["first_bad"]


def breakdown(repo, commit, workload, size, dtype="float32"):
    """The memory pass of `commit` (its own environment): step peaks and breakdown."""
    from harness import frameworks
    from harness.sweep import environment
    from harness.sweep.worker_process import run_worker
    from harness.versions import code_link, commits

    adapter = frameworks.get("autograd")
    full = commits.resolve(repo, commit, "commit")
    env_ = commits.environment(adapter, repo, full)
    cell = {"workload": workload, "size": size, "dtype": dtype, "framework": "autograd", "mode": "eager",
            "device": "cpu", "optimizer": None, "remat": "none", "order": None}
    job = {"cell": cell, "seed": 0, "optimizer": None, "lr": 1e-3, "warmup": 1, "repeat": 3, "memory_limit": None,
           "kind": "memory", "tracemalloc": False, "reference_gradient_path": None}
    with tempfile.TemporaryDirectory(prefix="gradmem-seeds-") as work:
        env, _ = environment.worker_environment(adapter, "memory")
        env = code_link.worker_environment(env, work, env_.paths)
        outcome = run_worker(job, env, work, "seed-memory", 900, python=env_.python)
    if not outcome.ok:
        raise RuntimeError(f"{commit}: memory pass {outcome.status}: {outcome.message}")
    return outcome.result


def section_autograd219(args):
    for workload in args.workloads.split(","):
        print(f"== {workload} {args.size}: steps of the backward step peak, {AUTOGRAD_GOOD}..{AUTOGRAD_BAD}", flush=True)
        steps = walk_steps(args.repo, workload, args.size, AUTOGRAD_GOOD, AUTOGRAD_BAD)
        for step in steps:
            before = breakdown(args.repo, step["last_good"], workload, args.size)
            after = breakdown(args.repo, step["first_bad"], workload, args.size)
            print(f"-- step at {step['first_bad'][:12]} (after {step['last_good'][:12]}); the bisected range's "
                  f"ends: {step['good_mib']:.2f} -> {step['bad_mib']:.2f} MiB backward step peak", flush=True)
            rows = [(f"peak {phase}", figures.at(before, "step_peak", phase), figures.at(after, "step_peak", phase))
                    for phase in ("forward", "backward")]
            moved = []
            for name in ("saved_activations", "gradients", "temporaries"):
                a, b = (before["breakdown_bytes"] or {}).get(name), (after["breakdown_bytes"] or {}).get(name)
                rows.append((name, a, b))
                if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                    moved.append((abs(b - a), name, a, b))
            for name, a, b in rows:
                print(f"   {name:<18} {_mib(a):>10} -> {_mib(b):>10}", flush=True)
            if moved:
                _, name, a, b = max(moved)
                print(f"   category that moved most: {name} ({_mib(a)} -> {_mib(b)} MiB)", flush=True)
            print(f"   bound (store-everything) {_mib(after.get('bound_bytes'))} MiB", flush=True)
    return 0


def section_pr4746(args):
    """shared_linear: the reference engine's three orders and the given frameworks, each
    with what its RSS timeline says is live when backward starts and its backward peak."""
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="gradmem-seeds-"), "pr4746.jsonl")
    command = [PYTHON, "-m", "harness", "run", "--workload", "shared_linear", "--framework",
               "reference," + args.frameworks, "--size", args.size, "--dtype", "float32",
               "--order", "heap,bfs,dfs", "--repeat", "3", "--quiet", "--out", out]
    if subprocess.run(command, cwd=PROJECT).returncode not in (0, 1):
        return 1
    for record in _records(out):
        print(_timeline_line(record), flush=True)
    print("backward order on K = 4 uses (gradient hooks, in the order they fired):", flush=True)
    order_probes(args.frameworks.split(","))
    return 0


def _records(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def timeline_in_backward(record):
    """What the RSS timeline (sampled from the parent every 2 ms) says about the steady
    step: MiB above the steady forward's start at the backward mark, the backward's
    maximum, and how many >= 0.5 MiB rises before that maximum and falls after it."""
    timeline = record.get("timeline") or {}
    marks = {name: t for t, name in timeline.get("marks") or []}
    if "forward" not in marks or "backward" not in marks:
        return None
    points = [(t, r) for t, r in zip(timeline["t_s"], timeline["rss_bytes"]) if t >= marks["forward"]]
    base = points[0][1]
    backward = [(r - base) / MIB for t, r in points if t >= marks["backward"]]
    if not backward:
        return None
    top = max(range(len(backward)), key=backward.__getitem__)
    return {
        "at_backward_start": backward[0], "backward_max": backward[top],
        "rises": sum(1 for i in range(1, top + 1) if backward[i] - backward[i - 1] >= 0.5),
        "falls": sum(1 for i in range(top + 1, len(backward)) if backward[i - 1] - backward[i] >= 0.5),
    }


def _timeline_line(record):
    peaks = figures.phases(record, "step_peak")
    label = f"{record.get('framework')}" + (f" order={record.get('order')}" if record.get("order") else "")
    text = (f"{label:<20} {record.get('status')}: step peak forward {_mib(peaks.get('forward'))}, backward "
            f"{_mib(peaks.get('backward'))} MiB (bound {_mib(record.get('bound_bytes'))})")
    breakdown_ = record.get("breakdown_bytes") or {}
    text += "; breakdown " + ", ".join(f"{k} {_mib(breakdown_.get(k))}" for k in ("saved_activations", "temporaries"))
    shape = timeline_in_backward(record)
    if shape:
        text += (f"; timeline: {shape['at_backward_start']:.1f} MiB live at backward's start, max "
                 f"{shape['backward_max']:.1f}, {shape['rises']} rises then {shape['falls']} falls")
    return text


# The order each framework's backward takes on K = 4 uses of one W (W^T per use), seen
# through gradient hooks: heap order interleaves dh_k with dWt_k (each W^T gradient is
# consumed before the next use's is made); breadth-first makes every dh_k first.
ORDER_PROBES = {
    "torch": """
import torch
order, outs = [], []
W = torch.randn(8, 8, requires_grad=True)
for k in range(4):
    Wt = W.t(); Wt.register_hook(lambda g, k=k: order.append(f"dWt{k}"))
    h = torch.tanh(torch.randn(3, 8) @ Wt); h.register_hook(lambda g, k=k: order.append(f"dh{k}")); outs.append(h)
torch.stack(outs).sum().backward()
print(" ".join(order))
""",
    "paddle": """
import numpy as np, paddle
paddle.set_device("cpu")
order, outs = [], []
W = paddle.to_tensor(np.random.randn(8, 8).astype("float32"), stop_gradient=False)
for k in range(4):
    Wt = paddle.transpose(W, [1, 0]); Wt.register_hook(lambda g, k=k: order.append(f"dWt{k}"))
    x = paddle.to_tensor(np.random.randn(3, 8).astype("float32"))
    h = paddle.tanh(paddle.matmul(x, Wt)); h.register_hook(lambda g, k=k: order.append(f"dh{k}")); outs.append(h)
paddle.sum(paddle.stack(outs)).backward()
print(" ".join(order))
""",
    # PyTensor: no order to observe; its gradient graph sums W's K contributions in one node
    "pytensor": """
import pytensor, pytensor.tensor as pt
W = pt.matrix("W"); xs = [pt.matrix(f"x{k}") for k in range(4)]
g = pytensor.grad(pt.sum(pt.stack([pt.tanh(x @ W.T) for x in xs])), W)
f = pytensor.function([W] + xs, g, mode="FAST_COMPILE")
adds = [len(n.inputs) for n in f.maker.fgraph.toposort() if str(n.op).startswith("Add")]
print("inputs of the Add nodes in W's gradient graph:", adds)
""",
    # TensorFlow: no order question: what its forward keeps under the tape with a
    # transpose per use (K materialised W^T) against matmul(transpose_b=True), each
    # variant in a fresh process (the allocator would reuse the first one's pages)
    "tensorflow": """
import sys, numpy as np, tensorflow as tf
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
W = tf.Variable(np.random.randn(512, 512).astype("float32") * 0.04)
xs = [tf.constant(np.random.randn(16, 512).astype("float32")) for _ in range(32)]
_ = tf.tanh(tf.matmul(xs[0], tf.transpose(W))), tf.matmul(xs[0], W, transpose_b=True)  # kernels loaded
start = rss()
with tf.GradientTape() as tape:
    hs = [tf.tanh(tf.matmul(x, tf.transpose(W)) if VARIANT == "transpose" else tf.matmul(x, W, transpose_b=True))
          for x in xs]
    loss = tf.reduce_sum(tf.stack(hs))
print(f"{VARIANT}: RSS after forward under the tape +{rss() - start:.1f} MiB (K = 32 uses of a 1 MiB W)")
""",
}
VARIANTS = {"tensorflow": ("transpose", "transpose_b")}


def order_probes(names):
    for name in names:
        if name not in ORDER_PROBES:
            continue
        for variant in VARIANTS.get(name, (None,)):
            code = ORDER_PROBES[name].replace("VARIANT", repr(variant)) if variant else ORDER_PROBES[name]
            env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", TF_CPP_MIN_LOG_LEVEL="3")
            done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300, env=env)
            out = done.stdout.strip()
            line = out.splitlines()[-1] if out else f"failed: {done.stderr.strip()[-300:]}"
            print(f"{name:<10} {line}", flush=True)


def _mib(value):
    return f"{value / MIB:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _run_and_print(args, run_args, name):
    """`harness run RUN_ARGS` into a JSONL file, then one line per record: each phase's
    step peak (steady, and the first step's), retained, bound, status."""
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="gradmem-seeds-"), f"{name}.jsonl")
    code = subprocess.run([PYTHON, "-m", "harness", "run", *run_args, "--quiet", "--out", out], cwd=PROJECT).returncode
    if code not in (*outcome.RAN_TO_THE_END, outcome.UNWRITABLE):  # failed cells are records: printed below
        return 1
    for record in _records(out):
        print(_phase_line(record), flush=True)
    return 0


def _phase_line(record):
    peaks, first = figures.phases(record, "step_peak"), figures.phases(record, "first_step_peak")
    phases = [p for p in ("forward", "backward", "step", "total") if isinstance(peaks.get(p), (int, float))]
    label = " ".join(str(record.get(k)) for k in ("workload", "size", "dtype", "framework", "mode"))
    label += "" if record.get("remat") in (None, "none") else f" remat={record.get('remat')}"
    if record.get("status") != "ok":
        return f"{label}: {record.get('status')}: {(record.get('message') or '').strip().splitlines()[0][:200] if record.get('message') else ''}"
    text = ", ".join(f"{p} {_mib(peaks[p])} (first step {_mib(first.get(p))})" for p in phases)
    return f"{label}: step peak MiB {text}; retained {_mib(figures.value(record, 'retained'))}; bound {_mib(figures.value(record, 'bound'))}"


def section_candle(args):
    """tiny_nerf paper (8 layers x 256, 1024 rays x 64 samples): forward-only peak vs after backward."""
    return _run_and_print(args, ["--workload", "tiny_nerf", "--framework", "torch,reference", "--size", "paper",
                                 "--dtype", "float32,float64", "--repeat", "3"], "candle")


def section_seq2seq(args):
    """seq2seq_attention with Adam: forward, backward, step per phase, PyTensor vs torch."""
    return _run_and_print(args, ["--workload", "seq2seq_attention", "--framework", "torch,pytensor", "--size",
                                 args.size, "--optimizer", "adam", "--repeat", "3"], "seq2seq")


def section_unet(args):
    """unet: plain vs each framework's checkpointing vs the reference engine's plans
    (articulation must refuse: U-Net has none), then peak against batch size."""
    code = _run_and_print(args, ["--workload", "unet", "--framework", "reference,torch,jax,tensorflow,paddle",
                                 "--size", "paper", "--remat", "none,native,articulation", "--repeat", "3"], "unet")
    out = os.path.join(tempfile.mkdtemp(prefix="gradmem-seeds-"), "unet-scale.jsonl")
    subprocess.run([PYTHON, "-m", "harness", "scale", "--workload", "unet", "--framework", "torch,tensorflow,reference",
                    "--size", "paper", "--batch", "1,2,4", "--out", out], cwd=PROJECT)
    return code


SECTIONS = {"autograd219": section_autograd219, "pr4746": section_pr4746, "candle": section_candle,
            "seq2seq": section_seq2seq, "unet": section_unet}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("section", help=f"one of {', '.join(SECTIONS)}")
    parser.add_argument("--repo", default=None, help="autograd219: a git checkout (or mirror) of HIPS/autograd")
    parser.add_argument("--workloads", default="rnn_fanout,chained_dot", help="autograd219: workloads (default both)")
    cli_options.add_axes(parser, size="small", single=("size",))
    parser.add_argument("--frameworks", default="torch,tensorflow,pytensor,paddle",
                        help="pr4746: the rows beside the reference engine")
    parser.add_argument("--out", default=None, help="pr4746: keep the records in this JSONL file")
    return parser.parse_args(argv)


def check(args):
    from harness import choices, workloads

    choices.check_choice("section", args.section, tuple(SECTIONS))
    choices.check_choice("size", args.size, choices.SIZES)
    choices.parse_choices("workload", args.workloads, workloads.NAMES)
    if args.section == "autograd219" and not args.repo:
        raise choices.ChoiceError("autograd219 needs --repo: a git checkout of HIPS/autograd (its 2017 history)")


def main(argv=None):
    args = parse_args(argv)
    from harness import choices

    try:
        check(args)
    except choices.ChoiceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return SECTIONS[args.section](args)


if __name__ == "__main__":
    sys.exit(main())
