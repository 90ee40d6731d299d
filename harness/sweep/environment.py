"""The environment a worker starts with, per pass, and what goes into provenance.

Set before the interpreter starts, because the libraries read them only then:

- every pass: one thread count for every framework (harness/frameworks/threads.py:
  GRADMEM_THREADS, OMP/BLAS/XLA/TF pools) and the adapter's own ``environment``
  (e.g. JAX without GPU preallocation, PyTensor's compile cache);
- the memory pass only: ``MALLOC_MMAP_THRESHOLD_=32768`` (a fixed threshold turns
  off glibc's dynamic one, so freed large buffers go back to the OS and a peak does
  not hide in memory the heap kept from earlier; with ``malloc_trim(0)`` before the
  baseline it matched allocator-exact figures within 0.3 %: docs/design.md, Evidence).
  32 KiB, not glibc's 128 KiB: buffers between the two (rnn_fanout small's 32 KiB
  hidden states) otherwise come from the heap, where how much of it a step touches
  anew moved torch rnn_fanout's step peak between 4.9 and 6.3 MB from step to step
  (torch's own allocator: 3.74 MB every step); mmapped, they measured 3.68-3.91 MB.
  Costs at most one page per buffer of 32 KiB or more (12 % at 32 KiB, < 3 % above
  128 KiB); smaller buffers stay on the heap, trimmed before each step. And ``TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1`` (TF's oneDNN CPU allocator is a caching
  pool that RSS cannot see through: docs/design.md, Evidence);
- the time pass runs with glibc's default allocator behaviour, what users run: the
  memory settings cost 8-50 % in page faults (docs/design.md, Evidence). Those variables
  are removed from the time pass's environment even when the caller exported them;
- the gradient pass (`harness check`, harness/check/framework_runner.py) as the time pass, plus the
  compile caches it keeps outside the repository (``gradient_settings()``): JAX's
  persistent compilation cache (JAX eager compiles every primitive once per shape,
  hundreds of XLA compilations for the tiny U-Net, about 5x faster warm: docs/design.md,
  Evidence: "Compile caches") and TF's start-up banners silenced. Not for measured passes: a warm cache would hide the
  first step's compilation that `compile_s` reports.
"""

import os

from harness.frameworks import threads

MEMORY_SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": "32768",
    "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
}


def cache_root():
    """gradmem's directory in the user's cache (~/.cache/gradmem)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "gradmem")


def gradient_settings():
    """The gradient pass's additions (set unless the caller exported its own)."""
    return {
        "JAX_COMPILATION_CACHE_DIR": os.path.join(cache_root(), "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        "TF_CPP_MIN_LOG_LEVEL": "2",  # TF's start-up banners, not its errors
    }


#: inherited variables that change what is measured, recorded when set (an explicit
#: list: the rest of the caller's environment is nobody's business)
WATCHED_PREFIXES = ("MALLOC_", "XLA_", "JAX_", "PYTORCH_", "PYTENSOR_", "OMP_", "MKL_", "OPENBLAS_", "GOMP_", "KMP_")
WATCHED = (
    "CUDA_VISIBLE_DEVICES",
    "LD_PRELOAD",
    "PYTHONDONTWRITEBYTECODE",  # with stale bytecode, every worker compiles modules again (versions/bytecode.py)
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_ONEDNN_USE_SYSTEM_ALLOCATOR",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_XLA_FLAGS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)


def worker_environment(adapter, pass_kind, base=None, thread_count=None):
    """(env for the worker process, {var: value} we set or inherited that matter).
    `thread_count`: the sweep's --threads (default: $GRADMEM_THREADS, else 2)."""
    env = dict(os.environ if base is None else base)
    ours = dict(threads.thread_environment(thread_count))
    ours.update(adapter.environment or {})
    if pass_kind == "memory":
        for key, value in MEMORY_SETTINGS.items():
            ours.setdefault(key, value)
    else:
        if pass_kind == "gradient":
            for key, value in gradient_settings().items():
                if key not in env:
                    ours.setdefault(key, value)
        for key in MEMORY_SETTINGS:
            if key not in (adapter.environment or {}):
                env.pop(key, None)
    env.update(ours)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a dying worker's last words reach the log
    recorded = {k: v for k, v in env.items() if k.startswith(WATCHED_PREFIXES) or k in WATCHED or k in ours}
    return env, dict(sorted(recorded.items()))
