"""The process's device memory as NVML reports it, sampled in a background thread.

NVML (``nvidia-ml-py``, module ``pynvml``) gives each process's ``usedGpuMemory``:
the CUDA context plus everything the framework's allocator holds (pools included), not
live tensors; it is the framework-neutral "device footprint" next to each allocator's
own figures (docs/design.md, Evidence: "CUDA"). It is polled, so spikes shorter than the
interval can be missed.

In containers NVML reports host PIDs, so this process's PID may not appear; the
sampler then falls back to the device's total used memory minus what was used when it
started, and says so in `method`.

On the H200 runs (results/gpu/) NVML answered per process in every record
(`nvmlDeviceGetComputeRunningProcesses (this process)`). Without the NVML library or a
device, `start()` records why and every figure is None.
"""

import os
import threading
import time

#: `method` when NVML listed this process among the device's compute processes: the
#: figure is this process's alone (harness/sweep/cuda_sharing.py lets CUDA memory passes
#: run side by side on that evidence)
PER_PROCESS_METHOD = "nvmlDeviceGetComputeRunningProcesses (this process)"
#: `method` when it did not: the device's used memory, every process on it included
DEVICE_WIDE_METHOD = "device used memory minus used at start (process not visible: container PIDs?)"


class NvmlSampler:
    def __init__(self, pid=None, interval_s=0.002):
        self.pid = os.getpid() if pid is None else pid
        self.interval_s = interval_s
        self.samples = []  # (monotonic t, bytes)
        self.unavailable = None
        self.method = None
        self._stop = threading.Event()
        self._thread = None
        self._nvml = None

    def start(self):
        """Start sampling; returns False (with `unavailable` set) when NVML cannot run."""
        try:
            import pynvml
        except ImportError:
            self.unavailable = "nvidia-ml-py is not installed (pip install 'gradmem[bench]')"
            return False
        try:
            pynvml.nvmlInit()
            handle = _device_handle(pynvml)
            self._nvml = pynvml
            self._handle = handle
            self._device_used0 = pynvml.nvmlDeviceGetMemoryInfo(handle).used
        except pynvml.NVMLError as err:
            self.unavailable = f"NVML: {err}"
            return False
        self._thread = threading.Thread(target=self._run, name="gradmem-nvml", daemon=True)
        self._thread.start()
        return True

    def _read(self):
        pynvml, handle = self._nvml, self._handle
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == self.pid and proc.usedGpuMemory is not None:
                self.method = PER_PROCESS_METHOD
                return proc.usedGpuMemory
        self.method = DEVICE_WIDE_METHOD
        return pynvml.nvmlDeviceGetMemoryInfo(handle).used - self._device_used0

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), int(self._read())))
            except Exception as err:  # noqa: BLE001 - a sampler must not kill the worker
                self.unavailable = f"NVML read failed: {err}"
                return
            self._stop.wait(self.interval_s)

    def peak(self, t_from=None, t_to=None):
        """Largest sample in [t_from, t_to] (monotonic seconds), or None."""
        window = [b for t, b in self.samples if (t_from is None or t >= t_from) and (t_to is None or t <= t_to)]
        return max(window) if window else None

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass


def _device_handle(pynvml):
    """The handle of the first GPU this process may use (CUDA_VISIBLE_DEVICES order)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith("GPU-") or visible.startswith("MIG-"):
        return pynvml.nvmlDeviceGetHandleByUUID(visible)
    return pynvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
