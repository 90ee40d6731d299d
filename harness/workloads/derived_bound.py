"""A bound without hand derivation: the saved activations of a store-everything pass.

The reference engine's ledger counts every buffer the engine made, once per buffer;
at the end of a forward pass with no remat plan, what is still live is exactly what
the VJPs hold for the backward pass (the tape keeps nothing else). Less the loss
scalar, that is the bound's definition (harness/workloads/__init__.py), measured on
the workload itself instead of derived by hand. Computed once per (workload, size,
dtype, batch) and process; deterministic (the ledger counts buffer sizes, not RSS).

It is the engine's store-everything pass, so it is an upper figure where a hand
derivation is cleverer: built-ins whose bound leaves out a buffer the engine keeps
(unet, tiny_nerf, seq2seq_attention: docs/workloads.md lists the gaps) derive more
than they declare; the others agree within 1 % (tests/workloads/test_derived_bound.py).
"""

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def derived_bound(name, size, dtype, batch=None):
    from harness import engine, workloads
    from harness.engine.api import vjp
    from harness.engine.ledger import Ledger

    workload = workloads.get(name)
    cfg = workloads.config(name, size, batch)
    params, inputs = workload.init(np.random.default_rng(0), cfg, dtype)
    ledger = Ledger()
    value, backward = vjp(lambda p: workload.loss(engine.ops, p, inputs, cfg), params, ledger=ledger)
    saved = ledger.live_bytes - getattr(value, "nbytes", 0)
    del backward
    return max(int(saved), 1)  # the record schema wants a positive bound
