"""Turning a failed pass into a status: "oom", "unavailable", "error" (and "timeout").

Out of memory looks different in every framework: Python's MemoryError (NumPy's
``_ArrayMemoryError`` is one), C++'s ``std::bad_alloc`` (an abort, no traceback),
torch's "DefaultCPUAllocator: can't allocate memory", XLA's ``RESOURCE_EXHAUSTED``,
TF's "OOM when allocating", a shared library that cannot be mapped, or a thread whose
stack cannot be mapped under an address-space limit. All of them are "oom"; a worker
the kernel killed with SIGKILL that the parent did not kill is "oom" too (the OOM
killer's signature).
"""

import signal
import traceback

MEMORY_PATTERNS = (
    "memoryerror",
    "std::bad_alloc",
    "cannot allocate memory",
    "can't allocate memory",
    "unable to allocate",
    "resource_exhausted",
    "resourceexhausted",
    "oom when allocating",
    "out of memory",
    "failed to map segment",
    "failed to allocate",
)
# Under RLIMIT_AS a new thread's stack is an mmap that fails: the limit, not a bug.
THREAD_PATTERNS = ("can't start new thread", "pthread_create", "resource temporarily unavailable")
TAIL_CHARS = 2000


def looks_like_oom(text, memory_limited=False):
    low = text.lower()
    if any(p in low for p in MEMORY_PATTERNS):
        return True
    return memory_limited and any(p in low for p in THREAD_PATTERNS)


def where(last_mark):
    return f" (last mark: {last_mark})" if last_mark else ""


def from_exception(err, last_mark=None, memory_limited=False):
    """The worker's result for an exception that ended its pass."""
    from harness.frameworks.base import Unavailable

    text = "".join(traceback.format_exception(err))
    head = f"{type(err).__name__}: {err}".strip()
    if isinstance(err, Unavailable):
        return {"status": "unavailable", "message": str(err)}
    if isinstance(err, MemoryError) or looks_like_oom(head, memory_limited):
        return {"status": "oom", "message": f"{_short(head)}{where(last_mark)}", "traceback": text[-TAIL_CHARS:]}
    return {"status": "error", "message": f"{_short(head)}{where(last_mark)}\n{text[-TAIL_CHARS:]}"}


def from_death(returncode, stderr_tail, last_mark=None, memory_limited=False):
    """The status of a worker that ended without writing a result."""
    tail = (stderr_tail or "").strip()[-TAIL_CHARS:]
    if returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == signal.SIGKILL:
            return "oom", f"worker killed by SIGKILL (the kernel's OOM killer?){where(last_mark)}\n{tail}".rstrip()
        status = "oom" if looks_like_oom(tail, memory_limited) else "error"
        return status, f"worker died of {name}{where(last_mark)}\n{tail}".rstrip()
    status = "oom" if looks_like_oom(tail, memory_limited) else "error"
    return status, f"worker exited with code {returncode} without a result{where(last_mark)}\n{tail}".rstrip()


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _short(text, limit=500):
    return text if len(text) <= limit else text[: limit - 3] + "..."
