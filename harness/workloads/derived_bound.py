"""A bound without hand derivation: the saved activations of a store-everything pass.

The reference engine's ledger counts every buffer the engine made, once per buffer;
at the end of a forward pass with no remat plan, what is still live is exactly what
the VJPs hold for the backward pass (the tape keeps nothing else). Less the loss
scalar, that is the bound's definition (harness/workloads/__init__.py), measured on
the workload itself instead of derived by hand. Computed once per (workload, config,
dtype) and process; deterministic (the ledger counts buffer sizes, not RSS). It takes
the workload and its config, so it needs nothing of the registry that calls it.

It is the engine's store-everything pass, so it is an upper figure where a hand
derivation is cleverer: built-ins whose bound leaves out a buffer the engine keeps
(unet, tiny_nerf, seq2seq_attention: docs/workloads.md lists the gaps) derive more
than they declare; the others agree within 1 % (tests/workloads/test_derived_bound.py).
"""

import functools

import numpy as np


def derived_bound(workload, cfg, dtype):
    """The bytes the reference engine keeps for the backward pass of `workload` (a
    workload module: harness/workloads/__init__.py's `get`) at config `cfg` in `dtype`."""
    return _derived(workload, tuple(sorted(cfg.items())), dtype)


@functools.lru_cache(maxsize=None)
def _derived(workload, cfg_items, dtype):
    from harness import engine
    from harness.engine.api import vjp
    from harness.engine.ledger import Ledger

    cfg = dict(cfg_items)
    params, inputs = workload.init(np.random.default_rng(0), cfg, dtype)
    ledger = Ledger()
    value, backward = vjp(lambda p: workload.loss(engine.ops, p, inputs, cfg), params, ledger=ledger)
    saved = ledger.live_bytes - getattr(value, "nbytes", 0)
    del backward
    return max(int(saved), 1)  # the record schema wants a positive bound
