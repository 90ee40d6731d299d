"""What torch.compile keeps after its steps, and how much of it Inductor's metrics lists hold.

    ENV=~/.cache/gradmem/envs/torch-2.4.0-py3.11     # a release's environment (harness releases)
    $ENV/bin/python tools/torch_inductor_metrics.py seq2seq_attention
    $ENV/bin/python tools/torch_inductor_metrics.py seq2seq_attention --keep-metrics-from-growing

torch 2.4.0 to 2.7.x: after compiling each graph, `compile_fx` appends every one of its
scheduler nodes to two module-level lists, `torch._inductor.metrics.node_runtimes` and
`nodes_num_elem`, which nothing but `metrics.reset()` empties; through them each graph's
Inductor Scheduler, its IR and the FX graphs it made stay alive for the life of the
process. 2.3.1 appended only on a benchmarking path; 2.8.0 does it only while the
`inductor_metrics` log is on (TORCH_LOGS=inductor_metrics). docs/releases.md, PyTorch:
the rise in what the compiled step keeps at 2.3.1 -> 2.4.0, and the fall at 2.8.0.

The harness's own compiled step of the workload (the torch adapter's `value_and_grad`),
as the memory pass takes `retained`: the runtime warm-up before the baseline
(harness/measure/runtime_warmup.py), the heap settled (gc, malloc_trim) before the
baseline and after three steps, an empty Inductor cache of its own. Prints the resident
bytes the steps leave, the entries in the two lists and the Schedulers alive.
`--keep-metrics-from-growing` puts lists there that keep nothing before the first compile.
`--python-heap` also traces the steps' Python allocations (tracemalloc, from the baseline)
and prints what of them is still alive after: Python objects or not, of what is kept (the
traced run is slower and its resident figure is tracemalloc's own, not the sweep's).
`--allocators` prints, from the baseline to after the steps, what the two allocators under
the resident figure hold: Python's small-object allocator (pymalloc, `sys._debugmallocstats`:
its 1 MiB arenas and the bytes live in them; an arena goes back to the system only when
every object in it is freed, so a few survivors of the compile keep whole arenas resident)
and glibc's malloc (`mallinfo2`: bytes live in its arenas and in mmapped blocks)."""

import argparse
import atexit
import ctypes
import gc
import os
import re
import shutil
import sys
import tempfile
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.frameworks.base import COMPILE_CACHE_ENV  # noqa: E402
from harness.measure import probes  # noqa: E402
from harness.units import MIB  # noqa: E402


class KeepsNothing(list):
    """A list that `+=` leaves empty: `compile_fx` rebinds the metric to what `+=` returns."""

    def __iadd__(self, other):
        return self


def _settled_rss():
    probes.settle()
    return probes.status_bytes()["VmRSS"]


def _pymalloc():
    """Python's small-object allocator: (bytes of the arenas it holds, bytes live in them),
    read from `sys._debugmallocstats`, which writes to file descriptor 2."""
    sys.stderr.flush()
    with tempfile.TemporaryFile("w+") as text:
        saved = os.dup(2)
        os.dup2(text.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        text.seek(0)
        stats = text.read()
    arenas, size = re.search(r"(\d+) arenas \* (\d+) bytes/arena", stats).groups()
    live = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", stats).group(1)
    return int(arenas) * int(size), int(live.replace(",", ""))


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _malloc_live():
    """Bytes live in glibc malloc, its arenas and its mmapped blocks (mallinfo2, glibc >= 2.33)."""
    from harness.measure import probes

    mallinfo2 = probes.libc().mallinfo2
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd


def _allocators():
    arenas, live = _pymalloc()
    return {"pymalloc arenas": arenas, "pymalloc live": live, "malloc live": _malloc_live()}


def _schedulers_alive():
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "Scheduler"
               and type(o).__module__ == "torch._inductor.scheduler")


def main(argv=None):
    from harness import workloads

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=workloads.NAMES)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "paper"))
    parser.add_argument("--keep-metrics-from-growing", action="store_true",
                        help="torch._inductor.metrics.node_runtimes and nodes_num_elem keep nothing")
    parser.add_argument("--python-heap", action="store_true",
                        help="trace the steps' Python allocations and print what of them stays alive")
    parser.add_argument("--allocators", action="store_true",
                        help="print what Python's small-object allocator and glibc's malloc hold, before and after")
    args = parser.parse_args(argv)
    # always an empty cache of its own: one inherited (a test process whose harness set it) may
    # hold these graphs already, and a cache hit skips the compile that fills the lists. Named
    # the way the worker names a cell's: the adapter's load() points Inductor there (over any
    # TORCHINDUCTOR_CACHE_DIR) and checks it does
    os.environ[COMPILE_CACHE_ENV] = tempfile.mkdtemp(prefix="gradmem-inductor-")
    atexit.register(shutil.rmtree, os.environ[COMPILE_CACHE_ENV], True)  # removed when the tool ends

    import numpy as np
    import torch
    from torch._inductor import metrics

    from harness.frameworks.torch import TorchAdapter
    from harness.measure.runtime_warmup import warm_runtime

    if args.keep_metrics_from_growing:
        metrics.node_runtimes, metrics.nodes_num_elem = KeepsNothing(), KeepsNothing()
    workload = workloads.get(args.workload)
    cfg = workloads.config(args.workload, args.size, None)
    params, inputs = workload.init(np.random.default_rng(0), cfg, np.float32)
    adapter = TorchAdapter().load(mode="compiled")
    step = adapter.value_and_grad(lambda ops, p, i: workload.loss(ops, p, i, cfg), mode="compiled")
    params, inputs = adapter.from_numpy(params), adapter.from_numpy(inputs)
    warm_runtime(adapter, "cpu", "compiled", np.float32)
    before = _settled_rss()
    held_before = _allocators() if args.allocators else None
    if args.python_heap:
        tracemalloc.start()
    for _ in range(3):
        result = step(params, inputs)
    del result
    kept = _settled_rss() - before
    python_heap = tracemalloc.get_traced_memory()[0] if args.python_heap else None
    tracemalloc.stop()  # pymalloc reports nothing while tracemalloc's hooks wrap it
    held_after = _allocators() if args.allocators else None
    print(f"torch {torch.__version__}, {args.workload} {args.size} compiled"
          f"{', metrics kept from growing' if args.keep_metrics_from_growing else ''}")
    print(f"retained: +{kept / MIB:.2f} MiB after 3 steps, settled")
    print(f"torch._inductor.metrics.node_runtimes: {len(metrics.node_runtimes)} entries, "
          f"nodes_num_elem: {len(metrics.nodes_num_elem)}")
    print(f"Inductor Schedulers alive: {_schedulers_alive()}")
    if python_heap is not None:
        print(f"Python heap the steps left alive (tracemalloc): {python_heap / MIB:.2f} MiB")
    if held_before is not None:
        for name, was in held_before.items():
            now = held_after[name]
            print(f"{name}: {was / MIB:.2f} -> {now / MIB:.2f} MiB ({(now - was) / MIB:+.2f})")


if __name__ == "__main__":
    main()
