"""The canonical workloads, one module each, written once against `harness.ops`.

A workload module defines:

- ``SOURCE``: the public report it comes from; ``STRESSES``: what it stresses;
- ``SIZES = {"tiny": {...}, "small": {...}, "paper": {...}}``: ``tiny`` for tests,
  ``small`` for CI and asv, ``paper`` = the sizes of the report it comes from. A
  size's dict is the workload's *config* (``cfg``); `config()` gives it, with the
  batch changed when asked;
- ``BATCH_AXIS``: the config key that counts the samples (sequences, images, rays,
  columns), which `harness scale` varies; every array that grows with the batch grows
  linearly in it;
- ``init(rng, cfg, dtype) -> (params, inputs)``: flat dicts of NumPy arrays built
  from the seeded ``numpy.random.Generator`` ``rng``;
- ``loss(ops, params, inputs, cfg)``: a scalar, using only ``ops`` (see
  harness/ops.py); ``cfg`` carries loop lengths and other static sizes that are not
  in the arrays' shapes. `build()` binds it, so adapters see
  ``loss(ops, params, inputs)``;
- ``bound_bytes(cfg, dtype)``: the bytes a store-everything reverse pass must keep
  (the activations its VJPs need), derived in a comment. Peak / bound is the
  efficiency figure the report shows. Every term of every bound has one factor of the
  batch, so the bound per sample is the bound at batch 1 (`bound_per_sample`);
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
    batch: int = None  # the value of the workload's BATCH_AXIS


def config(name, size, batch=None):
    """The config of workload `name` at `size` (a copy), its batch axis set to `batch`
    when given (a positive int)."""
    workload = get(name)
    check_choice("size", size, SIZES)
    cfg = dict(workload.SIZES[size])
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        cfg[workload.BATCH_AXIS] = batch
    return cfg


def bound_bytes(name, size, dtype, batch=None):
    """The analytic bound of `name` at `size` (and `batch`), in bytes of `dtype`."""
    check_choice("dtype", dtype, DTYPES)
    return int(get(name).bound_bytes(config(name, size, batch), dtype))


def bound_per_sample(name, size, dtype):
    """The bound's bytes per sample: the bound at batch 1 (each bound is linear in the
    batch, through zero: tests/test_workloads.py checks it)."""
    return bound_bytes(name, size, dtype, batch=1)


def build(name, size, dtype, seed=0, batch=None):
    """The Problem for one workload at one size and dtype (and batch, when given: the
    size's own otherwise), from a fixed seed."""
    workload = get(name)
    check_choice("dtype", dtype, DTYPES)
    cfg = config(name, size, batch)
    params, inputs = workload.init(np.random.default_rng(seed), cfg, dtype)
    return Problem(
        name=name,
        size=size,
        dtype=dtype,
        params=params,
        inputs=inputs,
        loss=functools.partial(workload.loss, cfg=cfg),
        bound_bytes=int(workload.bound_bytes(cfg, dtype)),
        batch=cfg[workload.BATCH_AXIS],
    )


def itemsize(dtype):
    return np.dtype(dtype).itemsize
