"""Gradients of workloads in one framework, in a process of their own.

``python -m harness.gradcheck REQUEST.json`` is the worker: it loads one framework and
computes, for each cell of the request (workload, size, dtype, mode), the loss and the
gradient with respect to the params, writing ``<id>.npz`` (arrays) and then
``<id>.json`` (status, timings) into the request's ``out_dir``. ``run_framework()`` is
the parent's side: it starts the worker, watches it, and turns a crash or a hang into
a status for the cell that was running, then goes on with the remaining cells in a
fresh worker. The parent never imports a framework.

Why a process per framework: frameworks must not share a process (each configures
threads, allocators and global flags at import), and one that crashes must be a row of
the table, not the end of the check.

A cell with ``"upcast": true`` casts the problem's float arrays to float64 before
computing: the reference engine's float64 gradient at exactly the point a float32 cell
sees (the float32-rounded params), which is what that cell is compared with.

The worker keeps two caches outside the repository, as the measurement worker does
for PyTensor: JAX's persistent compilation cache (JAX eager compiles every primitive
once per shape, ~280 XLA compilations for the tiny U-Net: 24 s cold, 4.5 s warm on
this machine) and PyTensor's compiledir (the adapter's own ``environment``).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from harness.frameworks import threads

STARTED, DONE, ARRAYS = ".started", ".json", ".npz"
LOG_TAIL = 2000  # characters of a dead worker's stderr kept in its cell's message


def cache_root():
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "gradmem")


def worker_environment(adapter):
    """The worker's environment: one thread count for every framework, the adapter's
    start-up settings, and the compile caches (see the module docstring)."""
    env = dict(os.environ)
    env.update(threads.thread_environment())
    env.update(getattr(adapter, "environment", None) or {})
    env.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(cache_root(), "jax"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up banners, not its errors
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---- the parent's side ---------------------------------------------------------------


@dataclass
class CellResult:
    """What one cell produced: status "ok", "error", "crashed", "timeout" or
    "unavailable"; loss and grads (NumPy) when ok."""

    id: str
    status: str
    message: str = ""
    loss: object = None
    grads: dict = field(default_factory=dict)
    first_s: float = None  # first call: compilation + one gradient
    steady_s: float = None  # second call


def run_framework(framework, cells, out_dir, device="cpu", timeout_s=600.0, command=None):
    """Compute `cells` (dicts with id, workload, size, dtype, mode, seed, upcast) in
    `framework`'s worker; {id: CellResult}. `timeout_s` bounds each cell; `command`
    replaces the worker's command line (tests)."""
    from harness import frameworks

    adapter = frameworks.get(framework)
    env = worker_environment(adapter)
    results, pending = {}, list(cells)
    while pending:
        request = os.path.join(out_dir, f"request-{framework}-{len(results)}.json")
        with open(request, "w") as f:
            json.dump({"framework": framework, "device": device, "out_dir": out_dir, "cells": pending}, f)
        argv = (command or [sys.executable, "-m", "harness.gradcheck"]) + [request]
        code, stderr = _run_watched(argv, env, out_dir, pending, timeout_s)
        still = []
        for cell in pending:
            path = os.path.join(out_dir, cell["id"])
            if os.path.exists(path + DONE):
                results[cell["id"]] = _load(cell["id"], path)
            elif os.path.exists(path + STARTED) and cell["id"] not in results:
                # the cell that was running when the worker died or was stopped
                why = f"no result within {timeout_s:g} s" if code == "timeout" else f"worker exited with {code}"
                results[cell["id"]] = CellResult(cell["id"], "timeout" if code == "timeout" else "crashed",
                                                 f"{why}; stderr: {stderr[-LOG_TAIL:].strip()}")
            else:
                still.append(cell)
        if len(still) == len(pending):  # the worker died before starting any cell
            for cell in still:
                results[cell["id"]] = CellResult(cell["id"], "crashed",
                                                  f"worker exited with {code} before this cell; stderr: {stderr[-LOG_TAIL:].strip()}")
            still = []
        pending = still
    return results


def _run_watched(argv, env, out_dir, cells, timeout_s):
    """Run the worker; stop it when one cell has run longer than `timeout_s`.
    (exit code or "timeout", stderr text)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        code = None
        while code is None:
            try:
                code = proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                running = _running_cell(out_dir, cells)
                if running is not None and time.time() - os.path.getmtime(running) > timeout_s:
                    os.killpg(proc.pid, 9)  # the worker's whole group (compiler children too)
                    proc.wait()
                    code = "timeout"
        err.seek(0)
        return code, err.read()


def _running_cell(out_dir, cells):
    for cell in cells:
        path = os.path.join(out_dir, cell["id"])
        if os.path.exists(path + STARTED) and not os.path.exists(path + DONE):
            return path + STARTED
    return None


def _load(cell_id, path):
    with open(path + DONE) as f:
        meta = json.load(f)
    result = CellResult(cell_id, meta["status"], meta.get("message", ""),
                        first_s=meta.get("first_s"), steady_s=meta.get("steady_s"))
    if meta["status"] == "ok":
        with np.load(path + ARRAYS) as arrays:
            result.loss = arrays["loss"]
            result.grads = {k[len("grad/"):]: arrays[k] for k in arrays.files if k.startswith("grad/")}
    return result


# ---- the worker ------------------------------------------------------------------------


def compute(adapter, cell, device="cpu"):
    """(loss, grads, first_s, steady_s) of one cell, in NumPy; the adapter is loaded."""
    from harness.workloads import build

    problem = build(cell["workload"], cell["size"], cell["dtype"], seed=cell.get("seed", 0))
    params, inputs = problem.params, problem.inputs
    if cell.get("upcast"):
        params, inputs = _float64(params), _float64(inputs)
    step = adapter.value_and_grad(problem.loss, mode=cell["mode"])
    p, i = adapter.from_numpy(params, device), adapter.from_numpy(inputs, device)
    start = time.perf_counter()
    adapter.sync(step(p, i))
    first = time.perf_counter() - start
    start = time.perf_counter()
    loss, grads = adapter.sync(step(p, i))  # the steady state is what gets measured
    steady = time.perf_counter() - start
    return adapter.to_numpy(loss), adapter.to_numpy(grads), first, steady


def _float64(tree):
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in tree.items()}


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # the .json appears whole: its presence means "done"


def worker_main(request_path):
    from harness import frameworks
    from harness.frameworks.base import Unavailable

    with open(request_path) as f:
        request = json.load(f)
    adapter = frameworks.get(request["framework"])
    device, out_dir = request["device"], request["out_dir"]
    loaded_mode = None
    for cell in request["cells"]:
        path = os.path.join(out_dir, cell["id"])
        open(path + STARTED, "w").close()
        meta = {"status": "ok"}
        try:
            if cell["mode"] != loaded_mode:
                adapter.load(device, cell["mode"])
                loaded_mode = cell["mode"]
            loss, grads, first, steady = compute(adapter, cell, device)
            arrays = {"loss": np.asarray(loss), **{f"grad/{k}": np.asarray(v) for k, v in grads.items()}}
            with open(path + ARRAYS, "wb") as f:
                np.savez(f, **arrays)
            meta.update(first_s=first, steady_s=steady)
        except Unavailable as err:
            meta = {"status": "unavailable", "message": str(err)}
        except Exception as err:  # reported in the table; the other cells go on
            tb = traceback.format_exc(limit=-3)
            meta = {"status": "error", "message": f"{type(err).__name__}: {err}\n{tb}"}
        _write_json(path + DONE, meta)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1]))
