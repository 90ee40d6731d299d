"""gradmem's reference reverse-mode engine, on NumPy (CuPy when given CuPy arrays).

    from harness.engine import ops, value_and_grad, vjp, Ledger
    ledger = Ledger()
    loss, grads = value_and_grad(f, argnums=(0,), order="heap", ledger=ledger)(x, z)
    ledger.peak_bytes, ledger.timeline

It does what the issue threads found the big frameworks getting wrong (docs/design.md, "The reference engine"):
VJPs save only what they need and only for inputs that need a gradient; saved arrays
and cotangents go as soon as they have been used; an elementwise VJP writes over the
cotangent it consumes and a shared weight's later contributions are added into its
gradient by one gemm with beta = 1 (a slab at a time where no CBLAS is at hand); nodes
that lead to no requested variable never run; float32 stays float32; and the ledger
counts every buffer it holds, views once. docs/engine.md says what each saved and
transient byte is for.

Modules, one job each, each importing only those listed before it: xp (NumPy or
CuPy), blas (C += A @ B in one gemm), ledger (live bytes), trace (the traces running
now: their ledger, phase and order), saving (what a VJP keeps, and how cheaply), tape
(traced values, nodes, primitives), prims/ (every primitive with its VJP, one module
per family), backward (the reverse pass and its schedules), api (vjp,
value_and_grad), remat_articulation (snapshots at the graph's separators), remat_node
(a recomputed stretch as one node), remat_revolve (binomial checkpointing of a chain),
remat (the checkpoint and chain ops and the plan they follow: none, sqrt/native,
revolve:S, articulation), ops (the op set), remat_simulate (the predicted peak of a
chain under a plan), testing (check_grads). The engine imports nothing of harness/
above it: the remat strategies' names and segmentation come from
harness/remat_strategies.py, a leaf the adapters read too.
"""

from harness.engine import ops, remat
from harness.engine.api import grad, value_and_grad, vjp
from harness.engine.backward import ORDERS
from harness.engine.ledger import Ledger

from harness.engine.remat import Plan, remat_plan

__all__ = ["ops", "remat", "value_and_grad", "vjp", "grad", "Ledger", "ORDERS", "Plan", "remat_plan"]
