"""shared_linear (small) compiled by Inductor, stepped as the sweep steps it: the
forward's and the backward's resident high-water marks per steady step, with any of
Inductor's or AOTAutograd's config options set, and the generated code kept for a diff.

Run it with a torch release's own Python (an environment `harness releases` built):

    MALLOC_MMAP_THRESHOLD_=32768 ~/.cache/gradmem/envs/torch-2.13.0-py3.11/bin/python \\
        tools/inductor_backward_peak.py [--inductor KEY=VALUE ...] [--functorch KEY=VALUE ...] \\
        [--code-dir DIR]

The step is the sweep's: fresh leaves W, b (`requires_grad_`), the compiled loss, then
`torch.autograd.grad` (the compiled backward's outputs are the gradients the step
returns; no `.grad` accumulation). Each phase's peak is VmHWM after clear_refs above
the resident bytes at the step's start, as the sweep reads its step peak
(MALLOC_MMAP_THRESHOLD_ as the sweep sets it, so that freed buffers leave, and
`malloc_trim(0)` before each step, as the sweep does); `live` is
what is resident above the step's start when the backward returns, gradients in hand.

`--inductor KEY=VALUE` sets `torch._inductor.config.KEY` (dotted for a sub-config,
`triton.cudagraphs=False`), `--functorch KEY=VALUE` sets `torch._functorch.config.KEY`
(AOTAutograd, the partitioner): the way to show which option moves the figure.
`--tanh-on-reuse light|heavy` changes one lowering heuristic (see `tanh_on_reuse`).
`--code-dir` copies every module Inductor generated (its `call()` is the graph's
buffers, kernels and `del`s) from the tool's empty Inductor cache, forward first.
"""

import argparse
import ast
import math
import os
import pathlib
import shutil
import sys
import tempfile

# an empty Inductor cache of its own: a cached graph would skip the passes this compares
CACHE = tempfile.mkdtemp(prefix="inductor-backward-peak-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = CACHE

import numpy as np  # noqa: E402
import torch  # noqa: E402

# this checkout's harness, whichever Python runs the tool (a release's environment)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from harness.measure import probes  # noqa: E402
from harness.units import MIB  # noqa: E402
from harness.workloads import shared_linear  # noqa: E402

B, D, K = (shared_linear.SIZES["small"][name] for name in "BDK")


def status_bytes(key):
    return probes.status_bytes()[key]


def trim_heap():
    """Free heap pages back to the OS, as the sweep does before each step: else buffers
    below the mmap threshold reuse pages the compile left resident and never show."""
    probes.malloc_trim()


def reset_peak():
    probes.reset_hwm()  # VmHWM back to the current RSS


def set_option(config, assignment):
    """`KEY=VALUE` on `config` (a torch config module); a clear error for a bad key."""
    key, sep, text = assignment.partition("=")
    if not sep:
        raise SystemExit(f"{assignment!r}: expected KEY=VALUE")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text  # a bare word: a string option
    valid = sorted(config.get_config_copy())  # every option, sub-configs dotted
    if key not in valid:
        raise SystemExit(f"{config.__name__} has no option {key!r} in torch {torch.__version__}; "
                         f"valid options there: {', '.join(valid)}")
    *parents, name = key.split(".")
    target = config
    for parent in parents:
        target = getattr(target, parent)
    setattr(target, name, value)
    return f"{key}={value!r}"


_judging_reuse = [False]


def tanh_on_reuse(rule):
    """Which rule Inductor's CPU lowering applies to a `tanh` read by several nodes.

    `StorageBox.should_realize_on_reuse` realizes (stores) a reused pointwise result
    on CPU when its body uses one of a list of "heavy" ops: exp and sigmoid up to
    2.12, and from 2.13 log, log10, log1p, log2 and tanh too. The list is local to
    that method, so the op set it sees is changed instead, in that method only:
    "light" hides tanh from it (the 2.12 rule), "heavy" shows tanh as exp, heavy in
    every release (the 2.13 rule)."""
    from torch._inductor import ir

    if not hasattr(ir.StorageBox, "should_realize_on_reuse") or not hasattr(ir.Loops, "inner_fn_opcount"):
        raise SystemExit(f"torch {torch.__version__}'s Inductor has no StorageBox.should_realize_on_reuse "
                         "/ Loops.inner_fn_opcount to change: --tanh-on-reuse was written against 2.12.1 and 2.13.0")

    def judged(original):
        def should_realize_on_reuse(self, *args, **kwargs):
            _judging_reuse[0] = True
            try:
                return original(self, *args, **kwargs)
            finally:
                _judging_reuse[0] = False
        return should_realize_on_reuse

    def counted(original):
        def inner_fn_opcount(self):
            result = original(self)
            if not _judging_reuse[0] or "tanh" not in result.used_ops:
                return result
            ops = type(result.used_ops)(op for op in result.used_ops if op != "tanh")
            if rule == "heavy":
                ops.add("exp")
            return result._replace(used_ops=ops)
        return inner_fn_opcount

    ir.StorageBox.should_realize_on_reuse = judged(ir.StorageBox.should_realize_on_reuse)
    ir.Loops.inner_fn_opcount = counted(ir.Loops.inner_fn_opcount)
    return f"tanh on reuse: {rule}"


def loss(W, b, x):
    # the workload's loss (harness/workloads/shared_linear.py): W^T taken at every use
    per_use = []
    for k in range(K):
        h = torch.tanh(torch.matmul(x[k], torch.permute(W, (1, 0))) + b)
        per_use.append(torch.mean(h * h, dim=(0, 1)))
    return torch.sum(torch.stack(per_use), dim=(0,))


def copy_code(code_dir):
    """Inductor's generated modules (those with a `call`), oldest first, into code_dir."""
    code_dir = pathlib.Path(code_dir)
    code_dir.mkdir(parents=True, exist_ok=True)
    modules = [p for p in pathlib.Path(CACHE).rglob("*.py") if "def call(" in p.read_text(errors="replace")]
    modules.sort(key=lambda p: p.stat().st_mtime)
    for number, path in enumerate(modules):
        shutil.copy(path, code_dir / f"{number}_{path.name}")
    return [f"{number}_{path.name}" for number, path in enumerate(modules)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inductor", action="append", default=[], metavar="KEY=VALUE",
                        help="set torch._inductor.config.KEY before compiling (repeatable)")
    parser.add_argument("--functorch", action="append", default=[], metavar="KEY=VALUE",
                        help="set torch._functorch.config.KEY before compiling (repeatable)")
    parser.add_argument("--tanh-on-reuse", choices=("shipped", "light", "heavy"), default="shipped",
                        help="light: a reused tanh is not realized for being heavy (<= 2.12); "
                             "heavy: it is (>= 2.13); shipped: the release's own rule")
    parser.add_argument("--code-dir", help="copy Inductor's generated modules here")
    parser.add_argument("--steps", type=int, default=3, help="steady steps measured after the compiling one")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: at least 1 steady step is measured")
    torch.set_num_threads(2)
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    settings = [set_option(inductor_config, a) for a in args.inductor]
    settings += [set_option(functorch_config, a) for a in args.functorch]
    if args.tanh_on_reuse != "shipped":
        settings.append(tanh_on_reuse(args.tanh_on_reuse))
    label = ", ".join(settings) or "as shipped"
    rng = np.random.default_rng(0)
    W0 = torch.tensor((0.9 / math.sqrt(D) * rng.standard_normal((D, D))).astype(np.float32))
    b0 = torch.tensor((0.1 * rng.standard_normal(D)).astype(np.float32))
    x = torch.tensor(rng.standard_normal((K, B, D)).astype(np.float32))
    compiled = torch.compile(loss, dynamic=False)
    for number in range(args.steps + 1):  # the first compiles
        trim_heap()
        start = status_bytes("VmRSS")
        reset_peak()
        with torch.enable_grad():
            W, b = W0.detach().requires_grad_(True), b0.detach().requires_grad_(True)
            value = compiled(W, b, x)
            forward = status_bytes("VmHWM") - start
            reset_peak()
            grads = torch.autograd.grad(value, [W, b])
            backward = status_bytes("VmHWM") - start
            live = status_bytes("VmRSS") - start
        del grads, value, W, b
        if number:
            print(f"torch {torch.__version__}, {label}: forward peak {forward / MIB:.2f} MiB, "
                  f"backward peak {backward / MIB:.2f} MiB, live after backward {live / MIB:.2f} MiB")
    if args.code_dir:
        print(f"generated modules in {args.code_dir}: {', '.join(copy_code(args.code_dir))}")
    shutil.rmtree(CACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
