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
  batch, so the bound per sample is the bound at batch 1 (`bound_per_sample`).
  Optional for a workload from outside the package: without it the bound is *derived*
  (harness/workloads/derived_bound.py: the reference engine's saved activations) and
  records say so (``bound_source``);
- ``SEGMENTS``: one line saying which parts the loss marks with ``ops.checkpoint`` /
  ``ops.chain`` (the segments a remat strategy may recompute), or "" for none.

A file may instead be a *native step* (plain framework code: ``FRAMEWORK``, ``setup``,
``step``; harness/steps/): `native` finds one, and `config` and the bound answer for it.
"""

import functools
import importlib
from dataclasses import dataclass

import numpy as np

from harness.choices import DTYPES, SIZES, check_choice
from harness.steps import contract as native_contract
from harness.workloads import loader

NAMES = ("chained_dot", "rnn_fanout", "unet", "tiny_nerf", "seq2seq_attention", "shared_linear", "transformer_block")


def with_segments(names=NAMES):
    """The names among `names` of the workloads that mark segments (SEGMENTS != ""):
    the only ones a remat strategy other than "none" changes."""
    return tuple(name for name in names if getattr(get(name), "SEGMENTS", ""))


def get(name):
    """The workload module called `name`: a built-in name, or an external reference
    (a .py path, module:attr: harness/workloads/loader.py). ChoiceError lists the
    valid names; WorkloadError names what an external module lacks."""
    if loader.is_external(name):
        return loader.load(name)
    check_choice("workload", name, NAMES)
    return importlib.import_module(f"harness.workloads.{name}")


def resolve(name):
    """The name cells and records carry: a built-in name as is, a file as its absolute
    path and content hash (loaded once here, so a broken file fails before any cell)."""
    if not loader.is_external(name):
        return check_choice("workload", name, NAMES)
    ref = loader.canonical(name)
    loader.load(ref)
    return ref


def parse(text):
    """--workload's value: "all" (the built-ins), or a comma-separated list of built-in
    names and external references, each resolved (`resolve`)."""
    if text in (None, "", "all"):
        return list(NAMES)
    return [resolve(item.strip()) for item in text.split(",") if item.strip()]


def native(name):
    """The native step module `name` refers to (harness/steps/), or None: a built-in or
    an op-set workload."""
    if not loader.is_external(name):
        return None
    module = loader.load(name)
    return module if native_contract.is_native(module) else None


def label(name):
    """A short readable name for tables: a file's stem, a built-in name as is."""
    return loader.short_name(name) if loader.is_external(name) else name


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
    bound_source: str = "declared"  # "derived": the reference engine's saved activations


def config(name, size, batch=None):
    """The config of workload `name` at `size` (a copy), its batch axis set to `batch`
    when given (a positive int)."""
    workload = get(name)
    check_choice("size", size, SIZES)
    if native(name) is not None:  # with the default cell's device and dtype (what setup gets)
        return native_contract.config(workload, size, label(name), batch)
    cfg = dict(workload.SIZES[size])
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        cfg[workload.BATCH_AXIS] = batch
    return cfg


def bound_bytes(name, size, dtype, batch=None):
    """The bound of `name` at `size` (and `batch`), in bytes of `dtype`: the workload's
    analytic `bound_bytes`, or the derived one where it declares none."""
    return bound_with_source(name, size, dtype, batch)[0]


def bound_with_source(name, size, dtype, batch=None):
    """(bytes, "declared" | "derived")."""
    check_choice("dtype", dtype, DTYPES)
    workload = get(name)
    if native(name) is not None:  # declared by the file, or absent (None, "absent")
        return native_contract.bound(workload, native_contract.config(workload, size, label(name), batch, dtype=dtype))
    if hasattr(workload, "bound_bytes"):
        return int(workload.bound_bytes(config(name, size, batch), dtype)), "declared"
    from harness.workloads.derived_bound import derived_bound

    return derived_bound(workload, config(name, size, batch), dtype), "derived"


def bound_per_sample(name, size, dtype):
    """The bound's bytes per sample: the bound at batch 1 (each bound is linear in the
    batch, through zero: tests/workloads/test_builtin.py checks it)."""
    return bound_bytes(name, size, dtype, batch=1)


def build(name, size, dtype, seed=0, batch=None):
    """The Problem for one workload at one size and dtype (and batch, when given: the
    size's own otherwise), from a fixed seed."""
    workload = get(name)
    if native(name) is not None:
        raise loader.WorkloadError(f"{label(name)} is a native step: it has no op-set problem to build "
                                   f"(harness/steps/runner.py runs its own step)")
    check_choice("dtype", dtype, DTYPES)
    cfg = config(name, size, batch)
    params, inputs = workload.init(np.random.default_rng(seed), cfg, dtype)
    bound, source = bound_with_source(name, size, dtype, batch)
    return Problem(
        name=name,
        size=size,
        dtype=dtype,
        params=params,
        inputs=inputs,
        loss=functools.partial(workload.loss, cfg=cfg),
        bound_bytes=bound,
        batch=cfg[workload.BATCH_AXIS],
        bound_source=source,
    )


def itemsize(dtype):
    return np.dtype(dtype).itemsize
