"""The canonical workloads, one module each, written once against `harness.ops`.

A workload module defines:

- ``SOURCE``: the public report it comes from; ``STRESSES``: what it stresses;
- ``SIZES = {"tiny": {...}, "small": {...}, "paper": {...}}``: ``tiny`` for tests,
  ``small`` for CI and asv, ``paper`` = the sizes of the report it comes from;
- ``init(rng, size, dtype) -> (params, inputs)``: flat dicts of NumPy arrays built
  from the seeded ``numpy.random.Generator`` ``rng``;
- ``loss(ops, params, inputs, cfg)``: a scalar, using only ``ops`` (see
  harness/ops.py); ``cfg`` is ``SIZES[size]`` (loop lengths and other static
  sizes that are not in the arrays' shapes). `build()` binds it, so adapters see
  ``loss(ops, params, inputs)``;
- ``bound_bytes(size, dtype)``: the bytes a store-everything reverse pass must keep
  (the activations its VJPs need), derived in a comment. Peak / bound is the
  efficiency figure the report shows;
- ``SEGMENTS``: one line saying which parts the loss marks with ``ops.checkpoint`` /
  ``ops.chain`` (the segments a remat strategy may recompute), or "" for none.
"""

import functools
import importlib
from dataclasses import dataclass

import numpy as np

from harness.choices import DTYPES, SIZES, check_choice

NAMES = ("chained_dot", "rnn_fanout", "unet", "tiny_nerf", "seq2seq_attention", "shared_linear")


def with_segments():
    """The names of the workloads that mark segments (SEGMENTS != ""): the only ones a
    remat strategy other than "none" changes."""
    return tuple(name for name in NAMES if get(name).SEGMENTS)


def get(name):
    """The workload module called `name` (ChoiceError lists the valid names)."""
    check_choice("workload", name, NAMES)
    return importlib.import_module(f"harness.workloads.{name}")


@dataclass
class Problem:
    """One workload at one size and dtype, ready for an adapter."""

    name: str
    size: str
    dtype: str
    params: dict  # NumPy arrays, the variables of the gradient
    inputs: dict  # NumPy arrays, data
    loss: object  # loss(ops, params, inputs) -> scalar
    bound_bytes: int


def build(name, size, dtype, seed=0):
    """The Problem for one workload at one size and dtype, from a fixed seed."""
    workload = get(name)
    check_choice("size", size, SIZES)
    check_choice("dtype", dtype, DTYPES)
    params, inputs = workload.init(np.random.default_rng(seed), size, dtype)
    return Problem(
        name=name,
        size=size,
        dtype=dtype,
        params=params,
        inputs=inputs,
        loss=functools.partial(workload.loss, cfg=workload.SIZES[size]),
        bound_bytes=int(workload.bound_bytes(size, dtype)),
    )


def itemsize(dtype):
    return np.dtype(dtype).itemsize
