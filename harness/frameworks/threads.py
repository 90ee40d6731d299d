"""One thread count for every framework, so time (and TensorFlow's memory) compare.

On 2 cores the thread setting moved NumPy and TensorFlow times by 65 % and TF's
graph-mode peak by a few MB (docs/design.md, Evidence: "Threads"), so every framework runs with
the same count: ``GRADMEM_THREADS`` (default 2). Each adapter applies it in ``load()``
through its framework's own API and reports what it set in ``settings()``; the
variables below are the same count for the libraries that only read the environment
at start-up, for a worker to set before it starts (``thread_environment()``).
"""

import os

ENV_VAR = "GRADMEM_THREADS"
DEFAULT_THREADS = 2


def thread_count(environ=None):
    """The thread count every framework must use: $GRADMEM_THREADS, default 2."""
    environ = os.environ if environ is None else environ
    text = environ.get(ENV_VAR, "").strip()
    if not text:
        return DEFAULT_THREADS
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{ENV_VAR}={text!r}: expected a positive integer (e.g. 1, 2, 4)")
    return count


def thread_environment(count=None):
    """Environment variables that fix `count` threads in libraries that read them only
    when they start (set them before the worker's interpreter starts)."""
    n = str(thread_count() if count is None else count)
    return {
        ENV_VAR: n,
        # BLAS / OpenMP pools: NumPy-based engines, and torch's OpenMP pool at import
        "OMP_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        # XLA's CPU client sizes its Eigen pool ("XLAEigen" threads) from PJRT_NPROC,
        # else from the schedulable CPUs (checked here: PJRT_NPROC=1 -> 1 pool thread)
        "PJRT_NPROC": n,
        # TensorFlow's intra-/inter-op pools (also set through tf.config in load())
        "TF_NUM_INTRAOP_THREADS": n,
        "TF_NUM_INTEROP_THREADS": n,
    }
