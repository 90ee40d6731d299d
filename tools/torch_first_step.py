"""What torch.compile's cold first step holds, phase by phase, in one release's environment.

    ENV=~/.cache/gradmem/envs/torch-2.8.0-py3.11     # a release's environment (harness releases)
    $ENV/bin/python tools/torch_first_step.py rnn_fanout
    $ENV/bin/python tools/torch_first_step.py rnn_fanout --no-guard-profile

The harness's own compiled step of the workload (the torch adapter's `split_vjp`), its
first call, as the memory pass measures it: the heap settled (gc, malloc_trim) and the
high-water mark reset before each phase, under the memory pass's allocator settings
(harness/sweep/environment.py MEMORY_SETTINGS, set here before the interpreter starts)
(or glibc's defaults, `--malloc default`) and an empty Inductor cache of its own.
Prints, in MiB, each phase's peak above its start and what it leaves.

`--no-guard-profile` replaces `torch._dynamo.guards.profile_guard_manager` with a no-op:
from torch 2.8.0 Dynamo times a frame's new guards once after compiling it, and that
call first "flushes the CPU cache" through a 32 MiB buffer it allocates, writes, reads
and frees (pytorch/pytorch PR #154764); the cold first step's forward phase peaks that
much higher (docs/releases.md, PyTorch, (4)). No torch setting turns it off."""

import argparse
import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.measure import probes  # noqa: E402
from harness.units import MIB  # noqa: E402


def _status():
    """VmRSS and VmHWM of this process, in MiB."""
    found = probes.status_bytes()
    return {key: found[key] / MIB for key in ("VmRSS", "VmHWM")}


def _settled():
    """The resident size after the memory pass's settle (gc, malloc_trim), the high-water
    mark reset to it."""
    probes.settle()
    probes.reset_hwm()
    return _status()["VmRSS"]


REEXECUTED = "GRADMEM_FIRST_STEP_REEXECUTED"  # set by _reexec_with for the process it starts


def _reexec_with(malloc):
    """The allocator settings are read at start-up: start again with them (once), and
    with an empty Inductor cache of its own (a cold compile), named the way the worker
    names a cell's (GRADMEM_COMPILE_CACHE_DIR: the adapter's load() points Inductor there
    and checks it does). A cache inherited from the caller (a test process whose harness
    set one, in that variable or in TORCHINDUCTOR_CACHE_DIR) may hold these graphs already,
    so it is replaced, never reused; the re-exec is marked by a variable of its own."""
    from harness.frameworks.base import COMPILE_CACHE_ENV
    from harness.sweep.environment import MEMORY_SETTINGS

    if os.environ.pop(REEXECUTED, None):  # the process started below: its cache goes when it ends
        atexit.register(shutil.rmtree, os.environ[COMPILE_CACHE_ENV], True)
        return
    wanted = dict(MEMORY_SETTINGS) if malloc == "memory-pass" else {k: None for k in MEMORY_SETTINGS}
    for key, value in wanted.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    os.environ[COMPILE_CACHE_ENV] = tempfile.mkdtemp(prefix="gradmem-inductor-")
    os.environ[REEXECUTED] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)


def main():
    from harness import workloads

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=workloads.NAMES)
    parser.add_argument("--size", default="small", choices=("tiny", "small", "paper"))
    parser.add_argument("--no-guard-profile", action="store_true",
                        help="Dynamo's guard profiling (and its 32 MiB cache flush) made a no-op")
    parser.add_argument("--malloc", default="memory-pass", choices=("memory-pass", "default"),
                        help="glibc as the memory pass sets it (a fixed 32 KiB mmap threshold: what is "
                             "freed goes back) or as users run it (default)")
    args = parser.parse_args()
    _reexec_with(args.malloc)

    import numpy as np
    import torch

    from harness.frameworks.torch import TorchAdapter

    if args.no_guard_profile:
        import torch._dynamo.guards as guards
        guards.profile_guard_manager = lambda *unused: 0.0
    workload = workloads.get(args.workload)
    cfg = workloads.config(args.workload, args.size, None)
    params, inputs = workload.init(np.random.default_rng(0), cfg, np.float32)
    adapter = TorchAdapter().load(mode="compiled")
    forward, backward = adapter.split_vjp(lambda ops, p, i: workload.loss(ops, p, i, cfg), mode="compiled")
    params, inputs = adapter.from_numpy(params), adapter.from_numpy(inputs)

    start = _settled()
    state = forward(params, inputs)
    after_forward = _status()
    backward_start = _settled()
    grads = backward(state)
    after_backward = _status()
    del state, grads
    left = _settled() - start
    print(f"torch {torch.__version__}, {args.workload} {args.size} compiled, cold first step, glibc {args.malloc}"
          f"{', guard profiling off' if args.no_guard_profile else ''} (MiB)")
    print(f"forward:  peak +{after_forward['VmHWM'] - start:.1f} above the step's start, "
          f"leaves +{after_forward['VmRSS'] - start:.1f}")
    print(f"backward: peak +{after_backward['VmHWM'] - backward_start:.1f} above its start, "
          f"leaves +{after_backward['VmRSS'] - backward_start:.1f}")
    print(f"step:     leaves +{left:.1f} once settled")


if __name__ == "__main__":
    main()
