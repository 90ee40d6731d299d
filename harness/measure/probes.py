"""CPU memory probes inside the worker: the kernel's high-water mark, and tracemalloc.

The primary CPU figure is resident memory as the kernel counts it (docs/design.md,
Evidence: within 0.3 % of the allocator-exact figures once glibc is configured):
``VmHWM`` (peak RSS) from /proc/self/status, reset to the current RSS by writing ``5``
to /proc/self/clear_refs at each phase boundary. A step peak is ``VmHWM`` minus the
resident bytes at the step's start (harness/measure/memory_meter.py).

Where clear_refs is not writable (some sandboxes), the HWM cannot be reset: the probe
then says so (``method``) and a phase's peak is the process-lifetime HWM minus the
step's start, which is still exact for the first phase that reaches it and an upper
bound for the others.
"""

import ctypes
import ctypes.util
import gc
import re
import tracemalloc

_STATUS_FIELD = re.compile(r"^(VmRSS|VmHWM|RssAnon|RssFile|RssShmem):\s+(\d+)\s+kB", re.MULTILINE)
#: the kinds of resident pages VmRSS adds up (/proc/self/status): heap and other
#: anonymous memory, file-backed pages (code and data of the libraries mapped, faulted
#: in on first use), shared memory
RSS_KINDS = {"anon": "RssAnon", "file": "RssFile", "shmem": "RssShmem"}
_libc = None


def status_bytes():
    """{"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem": bytes} of this process."""
    with open("/proc/self/status", encoding="ascii") as handle:
        text = handle.read()
    return {key: int(kb) * 1024 for key, kb in _STATUS_FIELD.findall(text)}


def libc():
    """This process's C library (loaded once): malloc_trim here, mallinfo2 in the tools."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return _libc


def malloc_trim():
    """Give glibc's free heap pages back to the OS (all arenas), so the baseline does not
    hide a peak in memory the heap already holds (docs/design.md, Evidence: "glibc's dynamic
    mmap threshold"). False when the
    C library has no malloc_trim (not glibc)."""
    trim = getattr(libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def settle():
    """Collect garbage, then trim the heap: what runs before every baseline/measured step."""
    gc.collect()
    malloc_trim()


def reset_hwm():
    """Reset VmHWM to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


class RssProbe:
    """Resident bytes of this process, absolute, and the baseline they are compared with.

    `set_baseline()` takes the baseline (after `settle()`, before the first step);
    `reset()` starts a phase (resets the HWM to the current RSS); `current()` is VmRSS
    now, `hwm()` VmHWM now (the peak since the last reset). The meter subtracts the
    resident bytes at a step's start (step peak) or the baseline (retained).
    """

    def __init__(self):
        self.resettable = reset_hwm()
        self.method = "VmHWM after clear_refs" if self.resettable else "VmHWM without reset (clear_refs not writable)"
        self.baseline = None
        self.baseline_kinds = {}

    def set_baseline(self):
        self.reset()
        self.baseline, self.baseline_kinds = self.current_with_kinds()
        return self.baseline

    def reset(self):
        if self.resettable:
            reset_hwm()

    def current(self):
        return status_bytes()["VmRSS"]

    def current_with_kinds(self):
        """(VmRSS, {anon, file, shmem}) from one reading: the kinds add up to VmRSS."""
        status = status_bytes()
        return status["VmRSS"], {kind: status.get(field, 0) for kind, field in RSS_KINDS.items()}

    def hwm(self):
        return status_bytes()["VmHWM"]

    def hwm_and_file(self):
        """(VmHWM, RssFile) from one reading: a phase's peak and the file-backed pages
        resident at its end."""
        status = status_bytes()
        return status["VmHWM"], status.get(RSS_KINDS["file"], 0)


class TracemallocProbe:
    """Python-heap and NumPy-buffer bytes (NumPy reports its data allocations to
    tracemalloc), for NumPy-based engines; zero for torch/JAX/TF, whose buffers are
    not traced. Started just before the step it measures; its own bookkeeping stays
    out of the RSS figures because it runs in a step of its own."""

    def __init__(self):
        self.baseline = None

    def start(self):
        tracemalloc.start()
        self.baseline = tracemalloc.get_traced_memory()[0]

    def reset(self):
        tracemalloc.reset_peak()

    def peak(self):
        return tracemalloc.get_traced_memory()[1] - self.baseline

    def live(self):
        return tracemalloc.get_traced_memory()[0] - self.baseline

    def stop(self):
        tracemalloc.stop()
