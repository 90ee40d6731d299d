"""`python -m harness new-workload PATH`: write a workload file that runs as it is.

The template is a commented two-layer MLP with a checkpointed segment and no
``bound_bytes`` (so the derived bound is used until one is written): edit its
``init``, ``loss`` and ``SIZES`` into your model, then

    python -m harness check --workload PATH --size tiny
    python -m harness run --workload PATH --framework reference,torch,jax --size small

docs/workloads.md walks through each part.
"""

import os
import re

from harness.choices import ChoiceError

TEMPLATE = '''"""{name}: what the model is, where it comes from.

A gradmem workload (the contract: harness/workloads/__init__.py's docstring; a guide:
docs/workloads.md). Check it, then measure it:

    python -m harness check --workload {path} --size tiny
    python -m harness run --workload {path} --framework reference,torch --size small --out r.jsonl
"""

import math

SOURCE = "where the model comes from (a paper, an issue, your repository)"
STRESSES = "what its memory depends on"
# The parts marked with ops.checkpoint / ops.chain, which a remat strategy may
# recompute (--remat native, sqrt, ...); "" if none.
SEGMENTS = "the hidden layer, one checkpoint"
# One config dict per size: tiny for tests (seconds in every framework), small for CI
# and asv, paper for the real size. The loss reads it as `cfg`.
SIZES = {{
    "tiny": {{"B": 4, "D": 8, "H": 16}},
    "small": {{"B": 64, "D": 256, "H": 1024}},
    "paper": {{"B": 256, "D": 1024, "H": 4096}},
}}
# The config key that counts samples: `harness scale` varies it; every array that
# grows with the batch must grow linearly in it.
BATCH_AXIS = "B"


def init(rng, cfg, dtype):
    """(params, inputs): flat dicts of NumPy arrays from the seeded rng, of `dtype`.
    params are what the gradient is taken of; inputs are data."""
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    params = {{
        "w1": (rng.standard_normal((D, H)) / math.sqrt(D)).astype(dtype),  # O(1) activations
        "w2": (rng.standard_normal((H, D)) / math.sqrt(H)).astype(dtype),
    }}
    inputs = {{"x": rng.standard_normal((B, D)).astype(dtype)}}
    return params, inputs


def loss(ops, params, inputs, cfg):
    """A scalar, written with `ops` only (harness/ops.py lists them): every framework
    runs this same code with its own ops."""
    def hidden(x, w):  # a segment: pure in its arguments (no arrays from a closure)
        return ops.relu(ops.matmul(x, w))

    h = ops.checkpoint(hidden, inputs["x"], params["w1"])
    y = ops.matmul(h, params["w2"])
    return ops.mean(ops.mul(y, y))


# Optional: the bytes a store-everything reverse pass must keep, derived by hand. Left
# out, gradmem derives it from its reference engine (records say bound_source
# "derived"). Here: relu's output (B, H), read by relu's VJP and w2's gradient, and y
# (B, D), read by mul(y, y)'s VJP.
# def bound_bytes(cfg, dtype):
#     itemsize = 4 if dtype == "float32" else 8
#     return cfg["B"] * (cfg["H"] + cfg["D"]) * itemsize
'''


def add_arguments(parser):
    parser.add_argument("path", help="the file to write (NAME.py); NAME is a Python identifier")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def main(args):
    path = args.path if args.path.endswith(".py") else args.path + ".py"
    name = os.path.basename(path)[:-3]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ChoiceError(f"new-workload {args.path!r}: the file's name must be a Python identifier, e.g. my_model.py")
    if os.path.exists(path) and not args.force:
        raise ChoiceError(f"new-workload: {path} exists (--force overwrites it)")
    with open(path, "w", encoding="utf-8") as f:
        f.write(TEMPLATE.format(name=name, path=path))
    print(f"wrote {path}; next: python -m harness check --workload {path} --size tiny")
    return 0
