"""Turning a failed pass into a status: "oom", "unavailable", "error" (and "timeout").

Out of memory looks different in every framework: Python's MemoryError (NumPy's
``_ArrayMemoryError`` is one), C++'s ``std::bad_alloc`` (an abort, no traceback),
torch's "DefaultCPUAllocator: can't allocate memory", XLA's ``RESOURCE_EXHAUSTED``,
TF's "OOM when allocating", OpenBLAS's "malloc failed" (an exit, no traceback), a
shared library that cannot be mapped, or a thread whose stack cannot be mapped under an
address-space limit. All of them are "oom". A worker
killed by a SIGKILL the parent did not send is "oom" when the kernel's OOM-kill count
(/proc/vmstat oom_kill) rose while it ran, else "error" naming the signal (someone
else killed it); where the count cannot be read, "oom" with a question mark.
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
    # OpenBLAS's buffers are malloc'd in C: "OpenBLAS: malloc failed in gemm_driver",
    # then exit(1), no Python exception to catch.
    "malloc failed",
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
    if getattr(err, "one_line", False):  # its message says what and where (a native step's own error)
        return {"status": "error", "message": _short(str(err)), "one_line": True, "traceback": text[-TAIL_CHARS:]}
    return {"status": "error", "message": f"{_short(head)}{where(last_mark)}\n{text[-TAIL_CHARS:]}"}


def oom_kills():
    """How many processes the kernel's OOM killer has killed since boot (memory
    cgroups' kills included), or None where /proc/vmstat does not say."""
    try:
        with open("/proc/vmstat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def from_death(returncode, stderr_tail, last_mark=None, memory_limited=False, oom_killed=None):
    """The status of a worker that ended without writing a result. `oom_killed`: whether
    the kernel's OOM-kill count rose while it ran (None: unknown)."""
    tail = (stderr_tail or "").strip()[-TAIL_CHARS:]
    if returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        if -returncode == signal.SIGKILL:
            return _sigkilled(oom_killed, where(last_mark), tail)
        status = "oom" if looks_like_oom(tail, memory_limited) else "error"
        return status, f"worker died of {name}{where(last_mark)}\n{tail}".rstrip()
    status = "oom" if looks_like_oom(tail, memory_limited) else "error"
    return status, f"worker exited with code {returncode} without a result{where(last_mark)}\n{tail}".rstrip()


def _sigkilled(oom_killed, place, tail):
    """A SIGKILL the parent did not send (it sends one only on timeout)."""
    if oom_killed is None:
        status, why = "oom", "the kernel's OOM killer? (/proc/vmstat has no oom_kill count to tell)"
    elif oom_killed:
        status, why = "oom", "the kernel's OOM killer: its kill count rose while the worker ran"
    else:
        status, why = "error", (
            "from outside, not the kernel's OOM killer (its kill count did not change): "
            "a person, a scheduler, or a userspace OOM killer such as systemd-oomd or earlyoom"
        )
    return status, f"worker killed by SIGKILL, {why}{place}\n{tail}".rstrip()


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _short(text, limit=500):
    return text if len(text) <= limit else text[: limit - 3] + "..."
