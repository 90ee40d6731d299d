"""A sweep callable from code: the cells measured, each record appended to a file.

    from harness.sweep import api as sweep
    from harness.sweep.cell_runner import Options

    todo = sweep.plan(workload="chained_dot", framework="reference,torch", size="tiny")
    code = sweep.run(todo, Options(repeat=3), "r.jsonl", sweep.How(quiet=True))

`run(cells, options, out, how)` is the whole of `harness run` after its arguments are
read (sweep/command.py calls it; so do `harness releases` for each round of a release
and the step_memory marker for its one cell): the cells (`plan`, or cells.expand),
the measurement settings every record carries (cell_runner.Options), the JSONL file
the records are appended to, and how the passes run (`How`: schedule, executor,
--resume, --budget, quiet). It returns the exit status outcome.py defines; a signal
stops it as it stops `harness run` (its workers killed, its records kept, 128 + the
signal). A caller that measures memory passes alone, taking each record as it comes
(`harness scale`, the releases' side-by-side confirmation), uses memory_passes.py.
"""

import errno
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

from harness import choices, interrupts, results, workloads
from harness.console import say
from harness.sweep import budget, cells, outcome, resume, schedule, summary_table as table, zygote
from harness.sweep.cell_runner import CellRunner
from harness.sweep.executor import LocalExecutor
from harness.versions import pins

EXECUTORS = ("local", "ray")


@dataclass
class How:
    """How a sweep runs its passes: everything `harness run` takes besides the cells,
    the measurement settings and --out (each field is that command's option)."""

    schedule: str = None  # serial | parallel (None: serial here, parallel on Ray)
    jobs: int = None  # parallel: memory passes at once (None: schedule.default_jobs)
    executor: str = "local"  # local | ray
    address: str = None  # ray: the cluster (None: one started here)
    start: str = "fork"  # fork | spawn (zygote.STARTS)
    resume: bool = False  # leave out the cells whose records `out` holds
    quiet: bool = False  # no progress line and no table
    budget: float = None  # seconds the whole sweep may take (budget.py)
    costs: str = None  # with budget: a JSONL file whose walls estimate each cell
    schedule_log: str = None  # JSONL file, one line per pass (tools/sweep_compare.py)

    def check(self):
        """ChoiceError for a value no sweep can run with; the schedule's default filled in."""
        if self.jobs is not None and self.jobs < 1:
            raise choices.ChoiceError("--jobs must be >= 1")
        choices.check_choice("executor", self.executor, EXECUTORS)
        if self.schedule is None:
            self.schedule = "parallel" if self.executor == "ray" else "serial"
        choices.check_choice("schedule", self.schedule, schedule.SCHEDULES)
        choices.check_choice("start", self.start, zygote.STARTS)
        if self.address is not None and self.executor != "ray":
            raise choices.ChoiceError("--address is the Ray cluster's: it needs --executor ray")
        if self.budget is not None:
            budget.check(self.budget)
            if self.executor != "local":
                raise choices.ChoiceError("--budget needs --executor local (a cluster's passes are not timed against it)")
            if self.costs is not None and not os.path.isfile(self.costs):
                raise choices.ChoiceError(f"--costs {self.costs}: no such file (a JSONL file of records)")
        elif self.costs is not None:
            raise choices.ChoiceError("--costs estimates cells for --budget: it needs --budget SECONDS")
        return self


def plan(workload="all", framework="all", size="small", dtype="float32", device="cpu", mode="eager",
         optimizer=None, remat="none", order="heap"):
    """The cells of `harness run`'s axes (each a comma-separated list, "all" for every
    valid name; ChoiceError names the valid choices of a bad one)."""
    if optimizer is not None:
        choices.check_choice("optimizer", optimizer, choices.OPTIMIZERS)
    from harness.engine.backward import ORDERS  # NumPy only
    from harness.frameworks.remat import parse_remat

    names = workloads.parse(workload)  # built-in names, .py files, module:attr
    remats = [item.strip() for item in str(remat).split(",") if item.strip()] or ["none"]
    for text in remats:
        parse_remat(text)  # ChoiceError naming the valid strategies
    segmented = workloads.with_segments(sorted(set(workloads.NAMES) | set(names)))
    if all(r != "none" for r in remats) and workload != "all":
        lacking = [w for w in names if w not in segmented]
        if lacking:
            raise choices.ChoiceError(
                f"--remat {remat}: {', '.join(lacking)} mark(s) no segments to rematerialise; "
                f"workloads with segments: {', '.join(segmented)}"
            )
    return cells.expand(
        names,
        pins.plan_frameworks(framework),
        choices.parse_choices("size", size, choices.SIZES),
        choices.parse_choices("dtype", dtype, choices.DTYPES),
        choices.parse_choices("device", device, choices.DEVICES),
        choices.parse_choices("mode", mode, choices.MODES),
        optimizer,
        remats=remats,
        orders=choices.parse_choices("order", order, ORDERS),
        segmented=segmented,
    )


def run(todo, options, out, how=None):
    """Measure the cells `todo` with `options` (cell_runner.Options), appending each
    finished cell's record to `out`; the exit status (outcome.py). ChoiceError for a
    bad `how` or, with `how.resume`, records in `out` measured with other settings."""
    how = (how or How()).check()
    with interrupts.handling():
        try:
            return Sweep(todo, options, out, how).run()
        except KeyboardInterrupt as stop:  # a signal after the cells' loop (the table)
            return getattr(stop, "exit_code", 130)


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


class Sweep:
    """One sweep, in steps: check that `out` can be appended to, leave out the cells
    `how.resume` finds, measure the rest in a scratch directory (each finished cell's
    record appended to `out` at once), then the table and the summary line."""

    def __init__(self, todo, options, out, how):
        # with a budget the cells run smallest size first, eager before compiled
        self.todo = budget.order(todo) if how.budget is not None else list(todo)
        self.options, self.out, self.how = options, out, how
        cuda = any(cell["device"] == "cuda" for cell in todo)
        self.jobs = 1 if how.schedule == "serial" else (
            how.jobs or schedule.default_jobs(cuda=cuda, threads=self.options.settings()["threads"]))
        self.budget = None  # budget.Budget of how.budget, made when measuring starts
        self.spent = None  # budget.BudgetSpent: the budget ran out while passes ran
        self.kept = []  # resume: the records already in `out`
        self.finished = {}  # cell index -> the record this sweep appended
        self.started = time.monotonic()
        self.progress = self.log = self.workdir = None
        # what is being written when an OSError comes: None (nothing yet), "scratch"
        # (the workers' job and result files in workdir) or "out" (a record to `out`);
        # `cell`: the cell whose files those are
        self.writing = None
        self.cell = self.todo[0] if self.todo else None

    def run(self):
        how = self.how
        try:
            results.check_appendable(self.out)  # before an hour of measuring, not after
        except results.RecordFileError as err:
            say(f"error: {err}")
            return outcome.BAD_INPUT
        if how.resume:
            self.kept, self.todo = resume.split(self.out, self.todo, self.options.settings())
            say(f"resume: {len(self.kept)} cell(s) already in {self.out}, {len(self.todo)} to measure", how.quiet)
            self.cell = self.todo[0] if self.todo else None
        self.progress = Progress(len(self.todo), how.quiet)
        try:
            stop = self.measure()
        except OSError as err:  # a full disk, a file-size limit, permissions
            if not (self.writing == "out" or (self.writing == "scratch" and err.errno in FULL_DISK)):
                raise  # before the scratch directory exists, or not a full disk there: a bug
            self.progress.done()
            where = self.out if self.writing == "out" else self.workdir
            say(_unwritable(where, self.cell, err, len(self.finished), self.out))
            return outcome.UNWRITABLE
        self.progress.done()
        if self.log is not None:
            self.log.close(schedule=how.schedule, jobs=self.jobs, cells=len(self.todo),
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
            if self.how.schedule_log:
                self.log = schedule.PassLog(self.how.schedule_log, self.started)
            executor = _executor(self.how, self.workdir, self.jobs, self.pass_started, self.log)
            runner = CellRunner(self.workdir, self.options, gpus=executor.gpus(), jobs=self.jobs)
            if self.how.budget is not None:
                self.budget = self.make_budget()
                executor.deadline = self.budget.deadline
            schedule.run(self.todo, runner, executor, self.emit, self.how.schedule, budget=self.budget)
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
        """The budget's clock, started with the sweep, its costs learned from `out`'s
        records and how.costs' beside the built-in table."""
        records = []
        for path in (self.out, self.how.costs):
            if path:
                try:  # only the cell's keys and its walls are read: any schema will do
                    records.extend(results.scan_records(path, check=False)[0])
                except results.RecordFileError:
                    pass  # no `out` yet; how.costs was checked in How.check
        costs = budget.CostTable(budget.learn(records))
        return budget.Budget(self.how.budget, costs, jobs=self.jobs, started=self.started,
                             report=lambda line: say(line, self.how.quiet))

    def pass_started(self, task):
        self.cell = task.job.get("cell") or self.cell
        self.progress.pass_started(task)

    def emit(self, index, record):
        """Append a finished cell's record to `out` (whole, even if a signal comes)."""
        self.cell, self.writing = self.todo[index], "out"
        with interrupts.deferred():
            results.append_record(self.out, record)
            self.finished[index] = record
        if self.budget is not None:
            self.budget.costs.add(record)  # this machine's own walls, for the cells still to come
        self.writing = "scratch"
        self.progress.done_count = len(self.finished)
        self.progress.show(self.todo[index], record["status"])

    def interrupted(self, stop):
        name = getattr(stop, "signal_name", "SIGINT")
        say(f"interrupted by {name}: {len(self.finished)} finished record(s) kept in {self.out}; "
            f"workers killed, temporary files removed; rerun with --resume to measure the rest")
        _print_table(self.kept + _in_order(self.finished), self.how.quiet)
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
        quiet = self.how.quiet
        note = self.budget_note()
        if note:
            say(note, quiet)
        if self.how.resume:  # the whole file, so the resumed sweep's table is complete
            kept, _ = results.scan_records(self.out)
            _print_table(resume.newest(kept), quiet)
        else:
            _print_table(_in_order(self.finished), quiet)
        say(
            f"{len(self.finished)} record(s) appended to {self.out} in {time.monotonic() - self.started:.0f} s "
            f"({self.how.schedule} schedule, {_where(self.how, self.jobs)})",
            quiet,
        )
        # the cells asked for: those resume kept and those measured now
        code, why = outcome.judge(self.kept + _in_order(self.finished))
        if why:
            say(why)  # even when quiet: it is what the exit status means
        return code


def _executor(how, workdir, jobs, on_start, on_end):
    if how.executor == "ray":
        from harness.sweep.ray_executor import RayExecutor  # ClusterError (exit 2) without Ray

        return RayExecutor(workdir, how.address, on_start=on_start, on_end=on_end)
    return LocalExecutor(workdir, slots=jobs, on_start=on_start, on_end=on_end, start=how.start)


def _where(how, jobs):
    if how.executor == "ray":
        return f"Ray cluster at {how.address}" if how.address else "Ray cluster started here"
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


def _print_table(records, quiet):
    if records and not quiet:
        try:
            print(table.format_table(records), flush=True)
        except OSError:
            pass
