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
harness/sweep/cuda_sharing.py). It is not the default: on the 2-core development machine (2026-11-23,
tools/sweep_compare.py) it was not faster
and its memory figures are not yet shown to match the serial ones within 1 %
(docs/measurement.md, "How a sweep is scheduled").

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

import errno
import os
import shutil
import sys
import tempfile
import time

from harness import choices, cli_options, results, workloads
from harness.console import say
from harness.units import parse_bytes
from harness import interrupts
from harness.sweep import budget, cells, outcome, resume, schedule, summary_table as table, zygote
from harness.sweep.cell_runner import CellRunner, Options
from harness.sweep.executor import LocalExecutor
from harness.measure.timing import Policy
from harness.versions import pins

EXECUTORS = ("local", "ray")


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
    """The cells `args` ask for (ChoiceError names the valid choices of a bad name)."""
    if args.optimizer is not None:
        choices.check_choice("optimizer", args.optimizer, choices.OPTIMIZERS)
    if args.repeat < 1 or args.warmup < 0:
        raise choices.ChoiceError("--repeat must be >= 1 and --warmup >= 0")
    if not 0 < args.precision < 1 or args.time_budget < 0:
        raise choices.ChoiceError("--precision must be in (0, 1) and --time-budget >= 0")
    if args.threads is not None and args.threads < 1:
        raise choices.ChoiceError("--threads must be >= 1")
    if args.jobs is not None and args.jobs < 1:
        raise choices.ChoiceError("--jobs must be >= 1")
    choices.check_choice("executor", args.executor, EXECUTORS)
    if args.schedule is None:
        args.schedule = "parallel" if args.executor == "ray" else "serial"
    choices.check_choice("schedule", args.schedule, schedule.SCHEDULES)
    if args.address is not None and args.executor != "ray":
        raise choices.ChoiceError("--address is the Ray cluster's: it needs --executor ray")
    from harness.engine.backward import ORDERS  # NumPy only
    from harness.frameworks.remat import parse_remat

    names = workloads.parse(args.workload)  # built-in names, .py files, module:attr
    remats = [item.strip() for item in str(args.remat).split(",") if item.strip()] or ["none"]
    for text in remats:
        parse_remat(text)  # ChoiceError naming the valid strategies
    segmented = workloads.with_segments(sorted(set(workloads.NAMES) | set(names)))
    if all(r != "none" for r in remats) and args.workload != "all":
        lacking = [w for w in names if w not in segmented]
        if lacking:
            raise choices.ChoiceError(
                f"--remat {args.remat}: {', '.join(lacking)} mark(s) no segments to rematerialise; "
                f"workloads with segments: {', '.join(segmented)}"
            )
    if getattr(args, "budget", None) is not None:
        budget.check(args.budget)
        if args.executor != "local":
            raise choices.ChoiceError("--budget needs --executor local (a cluster's passes are not timed against it)")
        if args.costs is not None and not os.path.isfile(args.costs):
            raise choices.ChoiceError(f"--costs {args.costs}: no such file (a JSONL file of records)")
    elif getattr(args, "costs", None) is not None:
        raise choices.ChoiceError("--costs estimates cells for --budget: it needs --budget SECONDS")
    todo = cells.expand(
        names,
        pins.plan_frameworks(args.framework),
        choices.parse_choices("size", args.size, choices.SIZES),
        choices.parse_choices("dtype", args.dtype, choices.DTYPES),
        choices.parse_choices("device", args.device, choices.DEVICES),
        choices.parse_choices("mode", args.mode, choices.MODES),
        args.optimizer,
        remats=remats,
        orders=choices.parse_choices("order", args.order, ORDERS),
        segmented=segmented,
    )
    return budget.order(todo) if getattr(args, "budget", None) is not None else todo


class Progress:
    """One status line on stderr (rewritten in place on a terminal)."""

    def __init__(self, total, quiet):
        self.total, self.quiet = total, quiet
        self.done_count = 0
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()

    def show(self, cell, what):
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        text = f"[{self.done_count}/{self.total} done] {cells.label(cell)}: {what}  ({elapsed:.0f} s)"
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def pass_started(self, task):
        """The executor started `task` (a pass of some cell)."""
        cell = task.job.get("cell")
        if cell:
            kind = task.job.get("kind", "").replace("_", " ")
            where = f" on {task.node['hostname']}" if task.node else ""  # a cluster's node
            self.show(cell, (f"{kind} pass started" if kind in ("memory", "time") else kind) + where)

    def done(self):
        if not self.quiet and self.tty:
            sys.stderr.write("\n")


def main(args):
    todo = plan(args)
    with interrupts.handling():
        try:
            return Sweep(todo, args).run()
        except KeyboardInterrupt as stop:  # a signal after the cells' loop (the table)
            return getattr(stop, "exit_code", 130)


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
        torch_index=getattr(args, "torch_index", None),
        prediction=getattr(args, "prediction", True),
        matmul_precision=getattr(args, "matmul_precision", "highest"),
    )


class Sweep:
    """One `harness run`, in steps: check that --out can be appended to, leave out the
    cells --resume finds, measure the rest in a scratch directory (each finished cell's
    record appended to --out at once), then the table and the summary line."""

    def __init__(self, todo, args):
        self.todo, self.args = todo, args
        self.options = options(args)
        cuda = any(cell["device"] == "cuda" for cell in todo)
        self.jobs = 1 if args.schedule == "serial" else (
            args.jobs or schedule.default_jobs(cuda=cuda, threads=self.options.settings()["threads"]))
        self.budget = None  # budget.Budget of --budget, made when measuring starts
        self.spent = None  # budget.BudgetSpent: the budget ran out while passes ran
        self.kept = []  # --resume: the records already in --out
        self.finished = {}  # cell index -> the record this sweep appended
        self.started = time.monotonic()
        self.progress = self.log = self.workdir = None
        # what is being written when an OSError comes: None (nothing yet), "scratch"
        # (the workers' job and result files in workdir) or "out" (a record to --out);
        # `cell`: the cell whose files those are
        self.writing = None
        self.cell = todo[0] if todo else None

    def run(self):
        args = self.args
        try:
            results.check_appendable(args.out)  # before an hour of measuring, not after
        except results.RecordFileError as err:
            say(f"error: {err}")
            return outcome.BAD_INPUT
        if args.resume:
            self.kept, self.todo = resume.split(args.out, self.todo, self.options.settings())
            say(f"resume: {len(self.kept)} cell(s) already in {args.out}, {len(self.todo)} to measure", args.quiet)
            self.cell = self.todo[0] if self.todo else None
        self.progress = Progress(len(self.todo), args.quiet)
        try:
            stop = self.measure()
        except OSError as err:  # a full disk, a file-size limit, permissions
            if not (self.writing == "out" or (self.writing == "scratch" and err.errno in FULL_DISK)):
                raise  # before the scratch directory exists, or not a full disk there: a bug
            self.progress.done()
            where = args.out if self.writing == "out" else self.workdir
            say(_unwritable(where, self.cell, err, len(self.finished), args.out))
            return outcome.UNWRITABLE
        self.progress.done()
        if self.log is not None:
            self.log.close(schedule=args.schedule, jobs=self.jobs, cells=len(self.todo),
                           wall_s=time.monotonic() - self.started)
        if stop is not None:
            return self.interrupted(stop)
        return self.summary()

    def measure(self):
        """Measure every cell; the KeyboardInterrupt (interrupts.Interrupted, or Ctrl-C
        where not handled) that stopped it, or None. No worker and no scratch file of
        the sweep is left afterwards, however it ended."""
        executor = None
        try:
            with interrupts.deferred():  # no signal between making the directory and owning it
                self.workdir = tempfile.mkdtemp(prefix="gradmem-sweep-")
                self.writing = "scratch"
            if self.args.schedule_log:
                self.log = schedule.PassLog(self.args.schedule_log, self.started)
            executor = _executor(self.args, self.workdir, self.jobs, self.pass_started, self.log)
            runner = CellRunner(self.workdir, self.options, gpus=executor.gpus(), jobs=self.jobs)
            if self.args.budget is not None:
                self.budget = self.make_budget()
                executor.deadline = self.budget.deadline
            schedule.run(self.todo, runner, executor, self.emit, self.args.schedule, budget=self.budget)
        except KeyboardInterrupt as err:
            return err
        except budget.BudgetSpent as err:
            self.spent = err
        finally:
            if executor is not None:
                executor.cancel_all()  # no worker outlives the sweep (nothing runs after a normal end)
                executor.close()  # the zygotes; or a Ray connection (and the cluster it started)
            if self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return None

    def make_budget(self):
        """The --budget clock, started with the sweep, its costs learned from --out's
        records and --costs' beside the built-in table."""
        args, records = self.args, []
        for path in (args.out, args.costs):
            if path:
                try:  # only the cell's keys and its walls are read: any schema will do
                    records.extend(results.scan_records(path, check=False)[0])
                except results.RecordFileError:
                    pass  # no --out yet; --costs was checked in plan()
        costs = budget.CostTable(budget.learn(records))
        return budget.Budget(args.budget, costs, jobs=self.jobs, started=self.started,
                             report=lambda line: say(line, args.quiet))

    def pass_started(self, task):
        self.cell = task.job.get("cell") or self.cell
        self.progress.pass_started(task)

    def emit(self, index, record):
        """Append a finished cell's record to --out (whole, even if a signal comes)."""
        self.cell, self.writing = self.todo[index], "out"
        with interrupts.deferred():
            results.append_record(self.args.out, record)
            self.finished[index] = record
        if self.budget is not None:
            self.budget.costs.add(record)  # this machine's own walls, for the cells still to come
        self.writing = "scratch"
        self.progress.done_count = len(self.finished)
        self.progress.show(self.todo[index], record["status"])

    def interrupted(self, stop):
        name = getattr(stop, "signal_name", "SIGINT")
        say(f"interrupted by {name}: {len(self.finished)} finished record(s) kept in {self.args.out}; "
            f"workers killed, temporary files removed; rerun with --resume to measure the rest")
        _print_table(self.kept + _in_order(self.finished), self.args)
        return getattr(stop, "exit_code", 130)

    def budget_note(self):
        """What the budget left undone, or "" (no budget, or everything ran)."""
        if self.budget is None:
            return ""
        left = len(self.todo) - len(self.finished)
        if not left:
            return ""
        recorded = {id(self.todo[index]) for index in self.finished}
        stopped = {id(cell) for cell in self.budget.stopped}  # in the endgame, for the cells waiting
        killed = sum(1 for cell in self.budget.begun if id(cell) not in recorded and id(cell) not in stopped)
        parts = []
        if self.budget.left_out:
            parts.append(f"{len(self.budget.left_out)} not started: not expected to end in time")
        if stopped:
            parts.append(f"{len(stopped)} stopped in the endgame so that measured cells got their time pass")
        if killed:
            parts.append(f"{killed} stopped at the budget, unrecorded")
        unreached = left - len(self.budget.left_out) - len(stopped) - killed
        if unreached:
            parts.append(f"{unreached} not reached before the budget ran out")
        return (f"budget {self.budget.seconds:.0f} s: {left} cell(s) left for --resume ({', '.join(parts)}); "
                f"{len(self.finished)} finished")

    def summary(self):
        args = self.args
        note = self.budget_note()
        if note:
            say(note, args.quiet)
        if args.resume:  # the whole file, so the resumed sweep's table is complete
            kept, _ = results.scan_records(args.out)
            _print_table(resume.newest(kept), args)
        else:
            _print_table(_in_order(self.finished), args)
        say(
            f"{len(self.finished)} record(s) appended to {args.out} in {time.monotonic() - self.started:.0f} s "
            f"({args.schedule} schedule, {_where(args, self.jobs)})",
            args.quiet,
        )
        # the cells asked for: those --resume kept and those measured now
        code, why = outcome.judge(self.kept + _in_order(self.finished))
        if why:
            say(why)  # even with --quiet: it is what the exit status means
        return code


def _executor(args, workdir, jobs, on_start, on_end):
    if args.executor == "ray":
        from harness.sweep.ray_executor import RayExecutor  # ClusterError (exit 2) without Ray

        return RayExecutor(workdir, args.address, on_start=on_start, on_end=on_end)
    return LocalExecutor(workdir, slots=jobs, on_start=on_start, on_end=on_end, start=args.start)


def _where(args, jobs):
    if args.executor == "ray":
        return f"Ray cluster at {args.address}" if args.address else "Ray cluster started here"
    return f"{jobs} job(s)"


FULL_DISK = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _unwritable(path, cell, err, appended, out):
    if path == out:
        what, where = f"to {out}", ""
    else:
        what, where = f"the sweep's scratch files in {path}", " in $TMPDIR (or point TMPDIR elsewhere)"
    return (
        f"error: cannot write {what}: {err.strerror or err} (errno {err.errno}); the sweep stops. "
        f"{cells.label(cell)} is not recorded; {out} keeps every record appended before ({appended} from this "
        f"sweep), whole: it is replaced whole or not at all. Free space{where}, then rerun with --resume."
    )


def _in_order(finished):
    return [finished[index] for index in sorted(finished)]


def _print_table(records, args):
    if records and not args.quiet:
        try:
            print(table.format_table(records), flush=True)
        except OSError:
            pass
