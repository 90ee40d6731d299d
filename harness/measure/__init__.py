"""Measurement: each cell's passes in fresh worker processes, probes, phases, timing.

- ``sweep``: the ``python -m harness run`` command (the matrix, progress, table);
- ``cell``: one cell = reference gradient + memory pass + time pass -> one record;
- ``schedule``: when each pass runs (parallel memory passes, time passes alone; or
  the old serial order); ``executor``: runs passes (submit, outcomes, cancel_all);
  ``ray_executor``/``node_pass``: the same passes as Ray tasks on a cluster's nodes;
- ``runner``: starts a worker, waits, kills its group on timeout, classifies its end;
- ``worker``: ``python -m harness.measure.worker JOB RESULT``, the fresh process;
- ``phases``: one training step as phases, and the meters that watch them;
- ``timing``: the time pass's repeats, the machine probe, the noisy mark;
- ``probes``: VmHWM/clear_refs, malloc_trim, tracemalloc; ``cuda``/``nvml``: devices;
- ``timeline``: the worker's RSS sampled from the parent; ``marks``: phase marks;
- ``environment``: the env a worker starts with; ``provenance``: commit, machine;
- ``failures``: exceptions and deaths -> statuses; ``stats``; ``table``.
"""
