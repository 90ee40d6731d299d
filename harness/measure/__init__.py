"""The worker's side: one pass of one cell inside a fresh process, and what it reads.

``python -m harness.measure.worker JOB RESULT`` is started by the sweep
(harness/sweep/worker_process.py) and imports only this package, the adapters and the
workloads; nothing here imports harness/sweep/.

- ``worker``: the process's main: the memory, time, reference-gradient and gradient
  (`harness check`) jobs, each turned into a JSON result written atomically;
- ``phases``: one training step as phases, and the meters that watch them;
- ``memory_meter``: step peak, retained and footprint per phase from the probes;
- ``probes``: VmHWM/clear_refs, malloc_trim, tracemalloc; ``cuda``/``nvml``: device
  memory from each framework's allocator and from NVML;
- ``breakdown``: where a step's bytes go (saved activations, gradients, ...);
- ``runtime_warmup``: the framework's runtime started before anything is measured;
- ``timing``: the time pass's repeats, the machine probe, the noisy mark;
  ``stats``: median, percentiles, spread;
- ``gradients``: `harness check`'s pass and the one gradient error (relative_error);
- ``marks``: phase marks the parent reads (timeline, post-mortems);
- ``failures``: exceptions and deaths -> statuses (the parent uses it for deaths).
"""
