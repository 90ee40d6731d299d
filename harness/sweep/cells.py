"""The matrix of cells a sweep runs, and what the parent can rule out without a worker.

A cell is (workload, size, dtype, framework, mode, device) plus its variant
(optimizer; remat, the rematerialisation strategy; order, the reference engine's
backward schedule; batch, the workload's batch axis when `harness scale` sets it). The parent rules out, cheaply and without importing any framework,
a framework that is not installed, a mode or remat strategy its adapter does not have,
and CUDA on a machine without an NVIDIA device; everything else is decided in the
worker.

Variants expand only where they mean something: a remat strategy other than "none"
only on workloads that mark segments (harness/workloads: SEGMENTS), an order only on
the reference engine (the other frameworks' cells carry order None). A native step
(harness/steps/) is a cell only in its own framework's row, mode eager, no remat, no
optimizer and no order (its file decides what its step runs): in the other rows it is
no cell at all, not an unavailable one; asked only for rows it has none in, or for a
size it lacks, the plan is an error naming what it has.
"""

import itertools

from harness import frameworks, workloads
from harness.choices import ChoiceError
from harness.steps import contract as native
from harness.frameworks.base import Unavailable, nvidia_device_nodes


def expand(workloads_, frameworks_, sizes, dtypes, devices, modes, optimizer=None, remats=("none",), orders=("heap",), segmented=None):
    """Every cell, in table order: size, dtype, device, mode, workload, framework
    (and version), remat, order. `frameworks_`: names, or (name, version) pairs
    (harness/versions/spec.py; version None = the installed one). `segmented`: the
    workloads a remat other than "none" applies to (None: all)."""
    cells = []
    pairs = [item if isinstance(item, tuple) else (item, None) for item in frameworks_]
    steps = _native_steps(workloads_, pairs, sizes, modes, remats)
    for size, dtype, device, mode, workload, (framework, version), remat in itertools.product(
        sizes, dtypes, devices, modes, workloads_, pairs, remats
    ):
        if remat != "none" and segmented is not None and workload not in segmented:
            continue
        step = steps.get(workload)
        if step is not None and not native.keeps(step, framework, mode, remat):
            continue  # not a cell: a native step runs in its own row only
        for order in orders if framework == "reference" and step is None else (None,):
            cells.append(
                {
                    "workload": workload,
                    "size": size,
                    "dtype": dtype,
                    "framework": framework,
                    "mode": mode,
                    "device": device,
                    "optimizer": optimizer if step is None else None,  # its own optimizer, in its file
                    "remat": remat,
                    "order": order,
                    "version": version,
                }
            )
    return cells


def _native_steps(names, pairs, sizes, modes, remats):
    """{workload: module} of the native steps among `names`, each checked to have a
    cell among the rows asked for and every size asked for (ChoiceError otherwise)."""
    steps = {}
    for name in names:
        step = workloads.native(name)
        if step is None:
            continue
        label = workloads.label(name)
        if not any(native.keeps(step, framework, mode, remat)
                   for framework, _ in pairs for mode in modes for remat in remats):
            raise ChoiceError(native.wrong_row(step, label, sorted({f for f, _ in pairs}), list(modes)))
        for size in sizes:
            native.check_size(step, size, label)
        steps[name] = step
    return steps


def label(cell):
    framework = cell["framework"] + (f"=={cell['version']}" if cell.get("version") else "")
    text = f"{cell['workload']} {framework} {cell['mode']} {cell['device']} {cell['size']} {cell['dtype']}"
    return text + (f" {variant(cell)}" if variant(cell) else "")


def variant(cell):
    """"+adam remat=sqrt order=bfs batch=8": the cell's non-default variant keys, or ""."""
    parts = [f"+{cell['optimizer']}"] if cell.get("optimizer") else []
    if cell.get("remat") not in (None, "none"):
        parts.append(f"remat={cell['remat']}")
    if cell.get("order") not in (None, "heap"):
        parts.append(f"order={cell['order']}")
    if cell.get("batch") is not None:
        parts.append(f"batch={cell['batch']}")
    return " ".join(parts)


def adapter_or_reason(name):
    """(adapter, "") or (None, why its module cannot be imported). Importing an adapter
    module is cheap: it imports its framework only in load()."""
    try:
        return frameworks.get(name), ""
    except ImportError as err:
        return None, f"the {name} adapter cannot be imported: {err}"


def unavailable_reason(cell, adapter, gpus=None):
    """Why `cell` cannot run here, decided without importing its framework; "" if it may.
    `gpus`: (present, where) of a cluster executor's nodes (None: this machine's)."""
    ok, reason = (True, "") if cell.get("version") else adapter.available()  # a pinned one: its own env
    if not ok:
        return reason
    try:  # the adapter's own checks, as its load() makes them in a worker
        adapter.check_mode(cell["mode"])
        adapter.check_dtype(cell["dtype"])
        adapter.check_remat(cell.get("remat") or "none")
    except (ChoiceError, Unavailable) as err:
        return str(err)
    if cell["device"] == "cuda":
        present, where = gpus or (nvidia_device_nodes(), "on this machine (no /dev/nvidia* device nodes)")
        if not present:
            return f"no NVIDIA GPU {where}: cuda cells cannot run here"
    return ""
