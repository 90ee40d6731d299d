"""Native steps: your own training step, written in your framework as you run it.

An op-set workload (harness/workloads) is a model rewritten once against `harness.ops`
so that every framework runs the same math: the way to compare frameworks. A *native
step* is a file of plain framework code, measured as it is: the way to measure your own
program. A file is a native step when it defines the names below (and no ``init`` or
``loss``: those make it an op-set workload); it is accepted wherever ``--workload`` is.

- ``FRAMEWORK``: the adapter whose row it runs in (``"torch"``, ``"jax"``, ...); in
  every other row it is not a cell;
- ``SIZES = {"tiny": cfg, "small": cfg}``: config dicts (any of tiny, small, paper;
  ``small`` is the commands' default), each handed to ``setup``; the harness adds the
  cell's ``device`` ("cpu" | "cuda") and ``dtype`` ("float32" | "float64") to it, so a
  config may not use those two keys;
- ``setup(cfg) -> state``: the model, optimizer and data, built before the baseline;
- ``step(state)``: one training step (it may return the loss);
- optional: ``BATCH_AXIS`` (the config key `harness scale` varies), ``sync(state)``
  (wait until the device has finished the step; default: the adapter's sync of what
  ``step`` returned), ``bound_bytes(cfg)`` (the bytes the step must keep, derived by
  hand: without it a record's bound is absent), ``SOURCE``.

Modules: `contract` (is it a native step, is it well formed, its configs, bound and
cells), `runner` (one step in a worker, under the same meters as every cell),
`breakdown` (where the framework's hooks say where the bytes go), `templates` and
`command` (`harness new-step`). docs/workloads.md, "Your own training step".
"""
