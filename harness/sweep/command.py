"""`python -m harness run`: measure a matrix of cells, one fresh worker per pass.

    python -m harness run --workload chained_dot --framework reference,torch \\
        --size small --dtype float64 --out r.jsonl

Defaults: every workload and framework, size small, float32 (what GPUs and the asv
grid use), cpu, eager, no optimizer, at least 5 timed steps after 1 warm-up step (more
until the median is known within 5 %, at most 5 s of them), a 600 s timeout per
worker, no memory limit, every framework on $GRADMEM_THREADS (default 2) threads. A
limit (--timeout, --memory-limit, --time-budget, --budget) is a positive number, or
`none` for no limit where one can be off (harness/cli_options.py); anything else is
refused with exit 2 before anything runs.
Lists are comma-separated; "all" means every valid name. Plural spellings (--workloads,
--frameworks, --sizes, --dtypes, --devices, --modes) are the same options, in every
command (harness/cli_options.py; benchmarks/common.py uses them).

Each finished cell's record is appended to --out at once, atomically (an existing
file is kept and appended to; the report lets the newest record of a cell win). A
cell that fails is a record with its status ("oom", "timeout", "error"; a framework or
device this machine lacks is "unavailable", not a failure); the sweep goes on, and
exits 0 when no cell failed, 4 when some did, 3 when no cell was measured at all, the
counts printed (outcome.py). SIGTERM, SIGHUP or Ctrl-C stop it: the
running workers are killed, every finished record is kept, the temporary directory is
removed, and the exit code is 128 + the signal (143, 129, 130; interrupts.py).
`--resume` then measures only the cells without a record (resume.py). A full disk
stops it with exit 1, naming the file; the records before are intact. The table of
this sweep's cells (with --resume, of every cell in the file) is printed at the end.
Every fault and what happens: docs/faults.md.

Executor: `--executor local` (default) runs the workers on this machine;
`--executor ray [--address ADDR]` runs each pass as a Ray task on a cluster's nodes,
each in the same fresh worker process, records appended here as they arrive
(harness/sweep/ray_executor.py, docs/ray.md); its default schedule is parallel.

Schedule (harness/sweep/schedule.py): `serial` (default) runs one pass at a time,
cell after cell. `--schedule parallel` runs reference gradients and memory passes
--jobs at a time (default: one per CPU); each time pass sets up beside them and
measures alone (a CUDA memory pass too, unless NVML answers per process:
harness/sweep/cuda_sharing.py). It is not the default: on 2 CPUs it was not faster
(tools/sweep_compare.py), and its memory figures are not yet shown to match the serial
ones within 1 % (docs/measurement.md, "How a sweep is scheduled").

Budget (harness/sweep/budget.py): `--budget SECONDS` sizes the sweep to its time: the
cells run smallest size first, eager before compiled (every workload in every row
before the next mode or size); the estimate of what fits is printed at the start (from
--out's own records, --costs FILE's, or the built-in table of recorded CUDA cells); a
cell starts only if it is expected to end in time; what still runs at the budget is
killed and gets no record. The sweep then says how many cells are left (they are not
failures: the exit status is that of the cells recorded);
`--resume` (with the same arguments, and a new --budget) goes on.

Start (harness/sweep/zygote.py): `fork` (default) forks each pass's worker from a
process per framework that has imported it; `--start spawn` starts a fresh
interpreter per pass.
"""

from harness import choices, cli_options
from harness.units import parse_bytes
from harness.sweep import api, zygote
from harness.sweep.cell_runner import Options
from harness.measure.timing import Policy


def add_arguments(parser):
    cli_options.add_axes(
        parser, workload="all", framework="all", size="small", dtype="float32", device="cpu", mode="eager",
        notes={"framework": "F==VERSION pins an exact release, measured in an environment of its own built on "
               "first use (e.g. jax==0.9.2,jax: docs/versions.md)"},
    )
    parser.add_argument(
        "--torch-index", default=None,
        help="where a pinned torch version may be installed from: an index URL (the PyTorch CPU index) or "
        "'pypi' (a CUDA build of several GB); without it a pinned torch is unavailable, never downloaded",
    )
    cli_options.add_optimizer(parser)
    parser.add_argument(
        "--remat",
        default="none",
        help="none|native[:variant]|sqrt|revolve:S|articulation[,...]: rematerialisation "
        "of the workloads' marked segments (default none; docs/remat.md)",
    )
    parser.add_argument(
        "--order", default="heap", help="heap|bfs|dfs[,...]: the reference engine's backward order (default heap)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed steps per cell, at least (default 5)")
    parser.add_argument(
        "--precision", type=float, default=Policy.precision,
        help=f"time more steps until the median is known within this fraction (default {Policy.precision})",
    )
    parser.add_argument(
        "--time-budget", action=cli_options.seconds_action(zero_ok=True), default=Policy.budget_s,
        help=f"seconds of timed steps per cell beyond which no more are added (default {Policy.budget_s:g}; "
        "0: exactly --repeat)",
    )
    parser.add_argument(
        "--matmul-precision", default="highest", choices=choices.MATMUL_PRECISIONS,
        help="float32 matrix products on a GPU: highest (default: full float32 in every framework, so gradients "
        "agree and times compare like with like) or tf32 (the tensor cores, on purpose)",
    )
    parser.add_argument(
        "--threads", type=int, default=None,
        help="threads of every framework (BLAS, OpenMP, XLA, TF pools; default $GRADMEM_THREADS, else 2)",
    )
    parser.add_argument(
        "--schedule", default=None,
        help="serial (one pass at a time; default with --executor local) | parallel (memory passes --jobs at a "
        "time, time passes alone; default with --executor ray)",
    )
    parser.add_argument(
        "--executor", default="local",
        help="local (default: workers on this machine) | ray (each pass a Ray task on a cluster's nodes; "
        "needs gradmem[ray]: docs/ray.md)",
    )
    parser.add_argument(
        "--address", default=None,
        help="with --executor ray: the cluster (ray start's address, e.g. 10.0.0.5:6379, or 'auto'); "
        "default: a one-node cluster started on this machine for the sweep",
    )
    parser.add_argument(
        "--start", default="fork", choices=zygote.STARTS,
        help="fork (default: each pass forked from a process per framework that has imported it; "
        "docs/measurement.md) | spawn (a fresh interpreter imports the framework for every pass)",
    )
    parser.add_argument(
        "--jobs", type=int, default=None,
        help="with --schedule parallel: memory passes at once (default: one per CPU, at most one per 4 GiB available)",
    )
    parser.add_argument("--warmup", type=int, default=1, help="warm-up steps after the cold first step (default 1)")
    parser.add_argument(
        "--leak-budgets", default=None, metavar="SHORT,LONG",
        help="seconds of the leak phase's extra steps: its short check and its longer run (default: a share of "
        "each memory pass's wall, 0.5-4 s and 2-12 s: docs/measurement.md); larger for a step of seconds, "
        "e.g. 30,120, so the phase reaches its readings",
    )
    cli_options.add_timeout(parser, 600.0)
    cli_options.add_memory_limit(parser)
    parser.add_argument(
        "--schedule-log", default=None,
        help="JSONL file: one line per pass (kind, cell, start/end, worker marks) for tools/sweep_compare.py",
    )
    parser.add_argument(
        "--no-prediction", dest="prediction", action="store_false",
        help="do not ask each framework for its own memory prediction of the step (taken after the "
        "measured steps, so it moves no figure; it costs a compile, about 1-60 s a cell: docs/predicted.md)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of every workload's inputs (default 0)")
    parser.add_argument("--out", required=True, help="JSONL file the records are appended to")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip the cells whose records are already in --out (run a killed sweep again with its own arguments)",
    )
    parser.add_argument(
        "--budget", action=cli_options.seconds_action(none_ok=True), default=None, metavar="SECONDS",
        help="seconds the whole sweep may take (default none: no budget): cells run smallest size first, eager "
        "before compiled; a cell starts only if it is expected to end in time (the estimate is printed at the "
        "start), passes still running at the budget are killed without a record; --resume goes on "
        "(harness/sweep/budget.py)",
    )
    parser.add_argument(
        "--costs", default=None,
        help="with --budget: a JSONL file of records whose worker walls estimate each cell's cost (beside "
        "--out's own records and the built-in table of recorded CUDA cells)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line and no table")


def plan(args):
    """The cells `args` ask for (ChoiceError names the valid choices of a bad name);
    `args.how` is set to how the sweep runs (api.How, checked)."""
    if args.repeat < 1 or args.warmup < 0:
        raise choices.ChoiceError("--repeat must be >= 1 and --warmup >= 0")
    if not 0 < args.precision < 1 or args.time_budget < 0:
        raise choices.ChoiceError("--precision must be in (0, 1) and --time-budget >= 0")
    if args.threads is not None and args.threads < 1:
        raise choices.ChoiceError("--threads must be >= 1")
    args.leak_budgets_s = leak_budgets(args.leak_budgets)
    args.how = how(args).check()
    return api.plan(args.workload, args.framework, args.size, args.dtype, args.device, args.mode,
                    optimizer=args.optimizer, remat=args.remat, order=args.order)


def leak_budgets(text):
    """(short, long) seconds of --leak-budgets SHORT,LONG, or None (the pass's share)."""
    if text is None:
        return None
    try:
        short, long = (float(part) for part in text.split(","))
    except ValueError:
        raise choices.ChoiceError(f"--leak-budgets {text!r}: two numbers of seconds, SHORT,LONG (e.g. 30,120)") from None
    if not 0 < short <= long:
        raise choices.ChoiceError(f"--leak-budgets {text!r}: seconds > 0, the short check's at most the longer run's")
    return short, long


def main(args):
    return api.run(plan(args), options(args), args.out, args.how)


def how(args):
    """How the sweep of `args` runs its passes (api.How)."""
    return api.How(schedule=args.schedule, jobs=args.jobs, executor=args.executor, address=args.address,
                   start=args.start, resume=args.resume, quiet=args.quiet, budget=args.budget, costs=args.costs,
                   schedule_log=args.schedule_log)


def options(args):
    """The measurement settings of `args` (cell_runner.Options)."""
    return Options(
        seed=args.seed,
        warmup=args.warmup,
        repeat=args.repeat,
        precision=args.precision,
        time_budget_s=args.time_budget,
        threads=args.threads,
        timeout_s=args.timeout,
        memory_limit=parse_bytes(args.memory_limit),
        torch_index=args.torch_index,
        prediction=args.prediction,
        matmul_precision=args.matmul_precision,
        leak_budgets_s=getattr(args, "leak_budgets_s", None),
    )
