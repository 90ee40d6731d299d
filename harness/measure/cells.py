"""The matrix of cells a sweep runs, and what the parent can rule out without a worker.

A cell is (workload, size, dtype, framework, mode, device) plus its variant
(optimizer). The parent rules out, cheaply and without importing any framework, a
framework that is not installed, a mode its adapter does not have, and CUDA on a
machine without an NVIDIA device; everything else is decided in the worker.
"""

import glob
import itertools

from harness import frameworks


def expand(workloads, frameworks_, sizes, dtypes, devices, modes, optimizer=None):
    """Every cell, in table order: size, dtype, device, mode, workload, framework."""
    cells = []
    for size, dtype, device, mode, workload, framework in itertools.product(
        sizes, dtypes, devices, modes, workloads, frameworks_
    ):
        cells.append(
            {
                "workload": workload,
                "size": size,
                "dtype": dtype,
                "framework": framework,
                "mode": mode,
                "device": device,
                "optimizer": optimizer,
                "remat": "none",
                "order": None,
            }
        )
    return cells


def label(cell):
    text = f"{cell['workload']} {cell['framework']} {cell['mode']} {cell['device']} {cell['size']} {cell['dtype']}"
    return text + (f" +{cell['optimizer']}" if cell.get("optimizer") else "")


def adapter_or_reason(name):
    """(adapter, "") or (None, why its module cannot be imported). Importing an adapter
    module is cheap: it imports its framework only in load()."""
    try:
        return frameworks.get(name), ""
    except ImportError as err:
        return None, f"the {name} adapter cannot be imported: {err}"


def unavailable_reason(cell, adapter):
    """Why `cell` cannot run here, decided without importing its framework; "" if it may."""
    ok, reason = adapter.available()
    if not ok:
        return reason
    if cell["mode"] not in adapter.modes:
        return f"{adapter.name} has no {cell['mode']!r} mode (its modes: {', '.join(adapter.modes)})"
    if cell["device"] == "cuda" and not nvidia_device_present():
        return "no NVIDIA GPU on this machine (no /dev/nvidia* device nodes): cuda cells cannot run here"
    return ""


def nvidia_device_present():
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*"))
