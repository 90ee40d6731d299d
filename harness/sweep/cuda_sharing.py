"""Whether CUDA memory passes may run beside each other.

A CUDA memory pass takes two kinds of device figure: its framework's allocator
(per process by construction) and NVML's (harness/measure/nvml.py). NVML answers per
process where it lists the worker's own PID among the device's compute processes;
where it cannot (a container whose PIDs NVML does not see) the sampler falls back to
the device's used memory, which counts every process on the device: two memory passes
side by side would then read each other's buffers.

NVML's answer is known only from inside a process that holds a CUDA context, so the
sweep finds it out from its first CUDA memory pass, run alone: its record's
``device_memory.nvml_method``. If that is the per-process method, later CUDA memory
passes run beside other passes (up to the sweep's --jobs); if it is the device-wide
fallback, or no pass has said yet (a framework without a device probe), they run alone.
A pass that ran beside others and still reports the device-wide method puts the rest
back to alone, and its record says its NVML figure is not its own. Each CUDA memory
pass's record says how it ran: ``provenance.cuda_concurrency``.

Time passes are unaffected: they measure alone whatever the device (executor.py).
"""

from harness import figures
from harness.measure.nvml import PER_PROCESS_METHOD


class CudaMemorySharing:
    def __init__(self, jobs):
        self.jobs = jobs
        self.per_process = None  # None: not known yet; True/False: what NVML answered
        self.evidence = None  # the nvml_method that decided it
        self.waiting = []  # CUDA memory tasks made while undecided, not started yet

    def exclusive(self):
        """Whether a CUDA memory pass made now must run alone."""
        return not (self.per_process and self.jobs > 1)

    def made(self, task):
        """A CUDA memory task was made: alone unless NVML is known to answer per process."""
        task.exclusive = self.exclusive()
        if task.exclusive and self.per_process is None:
            self.waiting.append(task)

    def learned(self, task, outcome):
        """A CUDA memory pass ended: read what NVML answered; the record's note on how
        the pass ran (provenance.cuda_concurrency)."""
        method = figures.nvml_method(outcome.result) if outcome.ok else None
        shared = not task.exclusive
        note = {
            "memory_pass": "beside other passes" if shared else "alone",
            "jobs": self.jobs if shared else 1,
            "nvml_method": method,
            "reason": self._reason(shared),  # as things stood when it started
        }
        if method == PER_PROCESS_METHOD:
            if self.per_process is None:
                self.per_process, self.evidence = True, method
                self._release_waiting()
        elif method is not None:  # NVML answered for the whole device
            if shared:
                note["nvml_note"] = "NVML answered for the whole device while other passes ran: its figure is not this pass's alone"
            self.per_process, self.evidence = False, method
            self.waiting.clear()
        return note

    def _release_waiting(self):
        for task in self.waiting:
            if task.started is None:  # not started: it may run beside others now
                task.exclusive = self.exclusive()
        self.waiting.clear()

    def _reason(self, shared):
        if shared:
            return f"NVML answers per process ({self.evidence}); allocator figures are per process"
        if self.jobs <= 1:
            return "one pass at a time (the sweep's --jobs is 1, or its schedule serial)"
        if self.per_process is None:
            return "NVML's answer (per process or for the whole device) not known yet when it started: alone"
        if self.per_process is False:
            return f"NVML answers for the whole device only ({self.evidence}): CUDA memory passes run alone"
        return "alone: started before NVML's per-process answer was known"
