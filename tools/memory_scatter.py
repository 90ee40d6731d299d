"""How much a cell's memory figures move from step to step and from process to process, and with what.

A cell's memory pass, exactly as a sweep's worker runs it (the same job and the same
environment, harness/sweep/environment.py), N times, each in a fresh interpreter, with
one setting changed at a time against the sweep's own:

    python tools/memory_scatter.py --framework jax --workload tiny_nerf --runs 5 \
        [--env PJRT_NPROC=1] [--env MALLOC_ARENA_MAX=1] [--warmup 3] [--memory-steps 9] \
        [--jax-sync-dispatch] [--steps 12] [--out runs.jsonl]

- ``--env K=V`` adds or overrides a variable of the worker's environment (``K=`` removes it);
- ``--warmup`` / ``--memory-steps``: the pass's warm-up steps and the steady steps whose
  median is the record's figure (the sweep's: 1 and 3);
- ``--jax-sync-dispatch``: JAX's CPU client without asynchronous dispatch (a config flag
  JAX reads only from ``jax.config``, set here before the backend starts; what users run
  has it on);
- ``--steps N``: instead of the memory pass, one process measuring N steady steps after
  the warm-up, each as the pass measures one (settle, HWM reset, the step's phases):
  the step-to-step scatter inside a process (buffers a compiled step keeps for itself,
  tinygrad's TinyJit, are not added to these steps as the pass adds them).

No reference gradient (the pass's gradient check is outside every measured window), no
time pass. Figures are read through harness/figures.py. The step peak of several
sweeps' files side by side is ``tools/memory_tables.py repeat``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness import choices, cli_options, figures, frameworks, workloads  # noqa: E402
from harness.sweep import cells  # noqa: E402
from harness.sweep.cell_runner import CellRunner, Options  # noqa: E402
from harness.units import MIB  # noqa: E402

AXES = ("workload", "framework", "size", "dtype", "mode")


def _memory_task(args, workdir):
    """The cell's memory pass as a sweep makes it (cell_runner.py: the same job, the
    same environment, the tracemalloc flag of a NumPy row included), with this run's
    warm-up and steady steps, and the worker's environment changed by --env."""
    (cell,) = cells.expand([args.workload], [args.framework], [args.size], [args.dtype], ["cpu"], [args.mode])
    runner = CellRunner(workdir, Options(warmup=args.warmup, prediction=False))
    state = runner.start(0, cell)
    if isinstance(state, dict):  # a record: the cell cannot run here
        sys.exit(f"{cells.label(cell)}: {state['status']}: {state.get('message')}")
    task = runner.memory_task(state)
    job = dict(task.job, memory_steps=args.memory_steps)
    env = dict(task.env)
    for item in args.env:
        key, _, value = item.partition("=")
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    return job, env


def _host(record):
    return dict(record, status=record.get("status", "ok"), device="cpu")


# ---- in the measured process --------------------------------------------------------------
def child(job_path, result_path, sync_dispatch, steps):
    with open(job_path, encoding="utf-8") as handle:
        job = json.load(handle)
    if sync_dispatch:
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)  # before the backend starts
    if not steps:
        from harness.measure import worker

        return worker.main([job_path, result_path])
    from harness.measure import probes, worker
    from harness.measure.marks import Marks
    from harness.measure.memory_meter import MemoryMeter
    from harness.measure.phases import NullMeter, settle_and_reset

    marks = Marks(None)
    adapter, _, step, _ = worker._prepare(job, marks)
    rss = probes.RssProbe()
    meter = MemoryMeter(rss, marks)
    adapter.buffer_cache_off()  # as the memory pass: MLX's and tinygrad's caches off
    probes.settle()
    rss.set_baseline()
    step.run(NullMeter())  # the cold first step (compiles, caches)
    for _ in range(job["warmup"]):
        settle_and_reset(rss)
        step.run(NullMeter())
    samples = []
    for _ in range(steps):
        settle_and_reset(rss)
        meter.start("")
        step.run(meter)
        samples.append(meter.figures())
    from harness.results import write_json_atomic

    write_json_atomic(result_path, {"status": "ok", "steady_samples": samples})
    return 0


# ---- the driver ----------------------------------------------------------------------------
#: the figures each run reports (harness/figures.py): the step peak first, the headline
REPORTED = ("step_peak", "retained", "footprint", "first_step_peak")


def _run_figures(result, in_process_steps):
    """This run's figures: the memory pass's own (the record's), or with --steps the
    median over the steps of each (no first step: those steps follow the warm-up)."""
    if not in_process_steps:
        return {name: figures.value(_host(result), name) for name in REPORTED}
    samples = [_host(sample) for sample in result["steady_samples"]]
    return {name: statistics.median(figures.value(sample, name) for sample in samples)
            for name in REPORTED if not name.startswith("first_step")}


def run(args):
    setting = " ".join(args.env + (["--jax-sync-dispatch"] if args.jax_sync_dispatch else [])
                       + ([f"--warmup {args.warmup}"] if args.warmup != 1 else [])
                       + ([f"--memory-steps {args.memory_steps}"] if args.memory_steps != 3 else [])) or "the sweep's"
    runs = []
    with tempfile.TemporaryDirectory(prefix="memory-scatter-") as work:
        job, env = _memory_task(args, work)
        job_path = os.path.join(work, "job.json")
        with open(job_path, "w", encoding="utf-8") as handle:
            json.dump(job, handle)
        for number in range(1, args.runs + 1):
            result_path = os.path.join(work, f"result-{number}.json")
            argv = [sys.executable, os.path.abspath(__file__), "--child", job_path, result_path,
                    "--steps", str(args.steps)] + (["--jax-sync-dispatch"] if args.jax_sync_dispatch else [])
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
            with open(result_path, encoding="utf-8") as handle:
                result = json.load(handle)
            if result.get("status") != "ok":
                print(f"run {number}: {result.get('status')}: {str(result.get('message'))[:300]}")
                continue
            found = _run_figures(result, args.steps)
            runs.append(found)
            steps = [figures.value(_host(sample), "step_peak") for sample in result["steady_samples"]]
            kept = [figures.value(_host(sample), "retained") for sample in result["steady_samples"]]
            first = (f"; first-step peak {found['first_step_peak'] / MIB:.2f}"
                     if found.get("first_step_peak") is not None else "")
            print(f"run {number}: step peak {found['step_peak'] / MIB:.2f} MiB; steady steps "
                  f"{', '.join(f'{s / MIB:.2f}' for s in steps)}; retained {', '.join(f'{k / MIB:.2f}' for k in kept)}"
                  f"; footprint {found['footprint'] / MIB:.2f}{first}", flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"cell": job["cell"], "setting": setting, "run": number,
                                             "in_process_steps": args.steps, **found,
                                             "steady_step_peaks": steps, "steady_retained": kept}) + "\n")
    if runs:
        what = f"median of {args.steps} steps in one process" if args.steps else "the memory pass's figures"
        print(f"{args.framework} {args.workload} {args.mode}, setting {setting}: {len(runs)} runs ({what})")
        for name in REPORTED:
            values = [found[name] for found in runs if found.get(name) is not None]
            if not values:
                continue
            low, high, mid = min(values), max(values), statistics.median(values)
            print(f"  {figures.get(name).label}: median {mid / MIB:.2f} MiB, {low / MIB:.2f}-{high / MIB:.2f}, "
                  f"spread {(high - low) / MIB:.2f} MiB ({(high - low) / mid:.1%})")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        steps = int(argv[argv.index("--steps") + 1])
        return child(argv[1], argv[2], "--jax-sync-dispatch" in argv, steps)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli_options.add_axes(parser, workload=cli_options.REQUIRED, framework=cli_options.REQUIRED, size="small",
                         dtype="float32", mode="eager", single=AXES)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes (default 5)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--memory-steps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=0, help="N steady steps in one process instead of the pass")
    parser.add_argument("--jax-sync-dispatch", action="store_true")
    parser.add_argument("--env", action="append", default=[], help="K=V added to the worker's environment (K= removes K)")
    parser.add_argument("--out", help="JSONL file each run's figures are appended to")
    args = parser.parse_args(argv)
    bad = [item for item in args.env if "=" not in item]
    if bad:
        parser.error(f"--env takes K=V (K= removes K), not {bad[0]!r}")
    if args.runs < 1 or args.memory_steps < 1 or args.warmup < 0 or args.steps < 0:
        parser.error("--runs and --memory-steps must be at least 1, --warmup and --steps at least 0")
    if args.jax_sync_dispatch and args.framework != "jax":
        parser.error("--jax-sync-dispatch is JAX's: it needs --framework jax")
    valid = {"workload": workloads.NAMES, "framework": frameworks.NAMES, "size": choices.SIZES,
             "dtype": choices.DTYPES, "mode": choices.MODES}
    try:
        for axis in AXES:
            choices.check_choice(axis, getattr(args, axis), valid[axis])
    except choices.ChoiceError as err:
        parser.error(str(err))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
