"""`python -m harness scale`: how memory grows with the batch, and the largest batch
that fits.

    python -m harness scale --workload rnn_fanout,unet --framework reference,torch \\
        --size small --batch 1,2,4,8 --out scale.jsonl
    python -m harness scale --workload unet --size small --batch auto --cap 1GiB \\
        --budget 1GiB --verify --out scale.jsonl

For each cell (workload, framework, size, dtype, device, mode) and each batch (the
workload's BATCH_AXIS: rnn_fanout B, unet N, tiny_nerf rays, seq2seq_attention B,
shared_linear B, chained_dot cols), one memory pass in a fresh worker; then, per cell,
least-squares lines bytes = fixed + per_sample x batch through the step peak of every
phase and through the footprint (harness/scale/series.py says which figures and why).
It prints per line the bytes per sample, the fixed bytes, R², the largest residual and
per_sample / bound per sample. `--budget` predicts the largest batch whose footprint
fits; `--verify` then measures the footprint at that batch and at 1.25x it, and where
that does not confirm it, predicts again from the two measured points that bracket
the budget (less their step-to-step scatter) and measures again, up to twice.

`--batch auto`: 1, 2, then doubling while the line through the points so far keeps
the next footprint within `--cap` (default: the budget, else 512 MiB), at most 12
points. Every record goes to `--out` like a sweep's (the batch is part of the cell;
times are null: no time pass runs); a cell that fails at some batch is recorded with
its status (oom, timeout, error) and kept out of the fit, and the run goes on.
SIGTERM, SIGHUP and Ctrl-C stop it as they stop `harness run` (interrupts.py): workers
killed, records kept, exit 128 + the signal; `--resume` skips the (cell, batch)
records already in --out. Bad input (fewer than 2 batches, a batch of 0, a malformed
budget) exits 2 before anything runs; a budget below a cell's fixed bytes is named
per cell and the command exits 2 after printing every fit. Otherwise the exit status is
`harness run`'s (harness/sweep/outcome.py): 0, or 3 when no (cell, batch) was measured,
4 when some failed and the others were measured. docs/scale.md.
"""

import math
import time

from harness import choices, cli_options, frameworks, results, workloads
from harness import interrupts
from harness.sweep import cells, outcome, resume
from harness.sweep.cell_runner import Options
from harness.sweep.memory_passes import MemoryPasses
from harness.console import say
from harness.units import MIB, parse_bytes
from harness.scale import batches as batch_specs
from harness.scale import series as scale_series
from harness.scale.fit import BudgetError, FitError, largest_batch, near_line
from harness.scale.table import format_fits, format_predictions

DEFAULT_CAP = 512 * MIB
CHECK_FACTOR = 1.25  # --verify measures the prediction and this multiple of it
REFINE_ROUNDS = 2  # predictions from the points measured near the budget, after the fit's


def add_arguments(parser):
    cli_options.add_axes(parser, workload="all", framework="all", size="small", dtype="float32", device="cpu",
                         mode="eager", notes={"size": "every dimension but the batch"})
    cli_options.add_optimizer(parser)
    parser.add_argument("--batch", default="1,2,4,8", help="B,B[,...] (2 or more, each >= 1) or auto (default 1,2,4,8)")
    parser.add_argument("--cap", default=None, help="--batch auto: footprint cap, bytes (suffix K/M/G; default the budget, else 512M)")
    parser.add_argument("--budget", default=None, help="predict the largest batch whose footprint fits in these bytes, e.g. 8GiB")
    parser.add_argument("--verify", action="store_true", help="with --budget: measure the footprint at the prediction and at 1.25x")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up steps after the cold first step (default 1)")
    cli_options.add_timeout(parser, 600.0)
    cli_options.add_memory_limit(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of every workload's inputs (default 0)")
    parser.add_argument("--out", required=True, help="JSONL file the records are appended to")
    parser.add_argument("--resume", action="store_true", help="skip the (cell, batch) records already in --out")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def plan(args):
    """(series cells without a batch, the batches or AUTO, budget, cap); ChoiceError
    for any bad input, before anything runs."""
    if args.optimizer is not None:
        choices.check_choice("optimizer", args.optimizer, choices.OPTIMIZERS)
    if args.warmup < 0:
        raise choices.ChoiceError("--warmup must be >= 0")
    spec = batch_specs.parse_batches(args.batch)
    budget = parse_bytes(args.budget, "--budget") if args.budget is not None else None
    if args.verify and budget is None:
        raise choices.ChoiceError("--verify checks a prediction: give --budget too (e.g. --budget 8GiB)")
    if args.cap is not None and spec != batch_specs.AUTO:
        raise choices.ChoiceError("--cap bounds --batch auto; with a list of batches leave it out")
    cap = parse_bytes(args.cap, "--cap") if args.cap is not None else (budget or DEFAULT_CAP)
    names = workloads.parse(args.workload)  # built-in names, .py files, module:attr
    for name in names:
        step = workloads.native(name)
        if step is not None and step.BATCH_AXIS is None:
            raise choices.ChoiceError(f"native step {workloads.label(name)} defines no BATCH_AXIS: scale varies the "
                                      f"config key it names (e.g. BATCH_AXIS = \"B\")")
    todo = cells.expand(
        names,
        choices.parse_choices("framework", args.framework, frameworks.NAMES),
        choices.parse_choices("size", args.size, choices.SIZES),
        choices.parse_choices("dtype", args.dtype, choices.DTYPES),
        choices.parse_choices("device", args.device, choices.DEVICES),
        choices.parse_choices("mode", args.mode, choices.MODES),
        args.optimizer,
    )
    return todo, spec, budget, cap


def main(args):
    todo, spec, budget, cap = plan(args)
    with interrupts.handling():
        try:
            return Scale(args, todo, spec, budget, cap).run()
        except KeyboardInterrupt as stop:
            return getattr(stop, "exit_code", 130)


class Scale:
    def __init__(self, args, todo, spec, budget, cap):
        self.args, self.todo, self.spec, self.budget, self.cap = args, todo, spec, budget, cap
        self.options = Options(seed=args.seed, warmup=args.warmup, timeout_s=args.timeout,
                               memory_limit=parse_bytes(args.memory_limit))
        self.records = []  # this run's records (and --resume's kept ones), oldest first
        self.started = time.monotonic()
        self.passes = 0

    def run(self):
        try:
            results.check_appendable(self.args.out)
        except results.RecordFileError as err:
            say(f"error: {err}")
            return 2
        if self.args.resume:
            self.records = self._kept()
        memory = None
        try:
            # no reference gradient and no time pass: harness check compares gradients
            memory = self.memory = MemoryPasses(self.options, reference=False,
                                                progress=None if self.args.quiet else self._progress)
            self._measure_series()
            fits = self._fits()
            print(format_fits(fits), flush=True)
            if self.budget is None:
                return self._done(fits)
            predictions = self._predict(fits)
            if self.args.verify:
                self._verify(predictions)
            print(format_predictions(predictions, self.budget), flush=True)
            return self._done(fits, predictions)
        except KeyboardInterrupt as stop:
            name = getattr(stop, "signal_name", "SIGINT")
            say(f"interrupted by {name}: {self.passes} record(s) of this run kept in {self.args.out}; workers "
                 "killed, temporary files removed; rerun with --resume to measure the rest")
            raise
        finally:
            if memory is not None:
                memory.close()  # its workers, zygotes and scratch directory

    # ---- measuring -------------------------------------------------------------------
    def _kept(self):
        records = resume.records_in(self.args.out)
        planned = {resume.series_key(c) for c in self.todo}
        kept = [r for r in records if r.get("batch") is not None and resume.series_key(r) in planned]
        say(f"resume: {len(kept)} record(s) of these cells already in {self.args.out}", self.args.quiet)
        return kept

    def _measured(self, cell):
        """{batch: record} of `cell`'s fit records so far (newest wins)."""
        key = resume.series_key(cell)
        found = {}
        for record in self.records:
            if resume.series_key(record) == key and record.get("batch") is not None and not record.get("scale_check"):
                found[record["batch"]] = record
        return found

    def _wave(self, wanted, check=None):
        """Measure [(cell, batch), ...] (one pass each); keep and return their records."""
        jobs, measured = [dict(cell, batch=batch) for cell, batch in wanted], []
        for cell, record in self.memory.run(jobs):
            if check is not None:
                record["scale_check"] = check(cell)
            with interrupts.deferred():  # a finished pass's record is written whole
                results.append_record(self.args.out, record)
                self.records.append(record)
                self.passes += 1
            measured.append(record)
            self._progress(cell, record["status"])
        return measured

    def _measure_series(self):
        if self.spec != batch_specs.AUTO:
            self._wave([(c, b) for c in self.todo for b in self.spec if b not in self._measured(c)])
            return
        active = list(self.todo)
        while active:
            wanted = []
            for cell in active:
                footprints = {b: scale_series.footprint_of(r) if r.get("status") == "ok" else None
                              for b, r in self._measured(cell).items()}
                batch = batch_specs.next_auto_batch(footprints, self.cap)
                if batch is not None:
                    wanted.append((cell, batch))
            self._wave(wanted)
            active = [cell for cell, _ in wanted]

    # ---- fitting, predicting, verifying ---------------------------------------------
    def _fits(self):
        wanted = {resume.series_key(c) for c in self.todo}
        chosen = None if self.spec == batch_specs.AUTO else set(self.spec)
        records = [r for r in self.records if chosen is None or r.get("batch") in chosen or r.get("scale_check")]
        grouped = scale_series.group(records)
        return [scale_series.fit(grouped[k]) for k in grouped if k in wanted]

    def _predict(self, fits):
        out = []
        for fit in fits:
            prediction = {"fit": fit, "batch": None, "error": "", "below": False, "checks": [], "rounds": []}
            if fit.footprint is None:
                prediction["error"] = fit.note or "no footprint line"
            else:
                try:
                    prediction["batch"] = largest_batch(fit.footprint, self.budget, f"the footprint of {fit.series.label}")
                except FitError as err:
                    prediction["error"] = str(err)
                    prediction["below"] = isinstance(err, BudgetError)
            out.append(prediction)
        return out

    def _verify(self, predictions):
        """Measure each prediction and 1.25x it; where that does not confirm it, predict
        again from the line through the measured points that bracket the budget (the
        fit's line was extrapolated from small batches; this one is where the budget
        is), less the largest step-to-step scatter of those two passes, and measure
        again: at most REFINE_ROUNDS times."""
        pending = [p for p in predictions if p["batch"] is not None]
        for round_ in range(1 + REFINE_ROUNDS):
            self._check_round(pending, round_)
            if round_ == REFINE_ROUNDS:
                break  # the last prediction stays the one measured
            pending = [p for p in pending
                       if scale_series.verdict(p["checks"], self.budget) != "confirmed" and self._refine(p)]
            if not pending:
                break

    def _check_round(self, predictions, round_):
        wanted, by_cell = [], {}
        for prediction in predictions:
            batch, cell = prediction["batch"], prediction["fit"].series.cell
            prediction["checks"] = []
            prediction["rounds"].append((batch, prediction["checks"]))
            for factor in (1.0, CHECK_FACTOR):
                at = batch if factor == 1.0 else max(batch + 1, math.ceil(batch * factor))
                wanted.append((cell, at))
                by_cell[(resume.series_key(cell), at)] = (prediction, factor)

        def check(cell):
            prediction, factor = by_cell[(resume.series_key(cell), cell["batch"])]
            return {"budget_bytes": self.budget, "predicted_batch": prediction["batch"], "factor": factor,
                    "round": round_}

        for record in self._wave(wanted, check):
            prediction, factor = by_cell[(resume.series_key(record), record["batch"])]
            prediction["checks"].append((factor, record))

    def _refine(self, prediction):
        """A new prediction from the measured points nearest the budget; False when
        there is none (too few points, or it is the batch just checked)."""
        measured = dict(prediction["fit"].series.records)
        for _, checks in prediction["rounds"]:
            measured.update({r["batch"]: r for _, r in checks})
        ok = {b: r for b, r in measured.items() if r.get("status") == "ok" and scale_series.footprint_of(r) is not None}
        try:
            line = near_line([(b, scale_series.footprint_of(r)) for b, r in ok.items()], self.budget)
            margin = max(scale_series.spread_of(ok[b]) for b, _ in line.points)
            batch = largest_batch(line, self.budget - margin, f"the footprint of {prediction['fit'].series.label}",
                                  fixed_at_least_zero=False)
        except FitError as err:
            prediction["error"] = f"no refined prediction: {err}"
            return False
        if batch == prediction["batch"]:
            return False
        prediction["batch"] = batch
        return True

    def _done(self, fits, predictions=()):
        below = [p for p in predictions if p["below"]]
        for p in predictions:
            if p["error"]:
                say(f"error: {p['fit'].series.label}: {p['error']}")
        say(f"{self.passes} memory pass(es) recorded in {self.args.out} in {time.monotonic() - self.started:.0f} s",
             self.args.quiet)
        if below:
            return outcome.BAD_INPUT
        # as `harness run` says it: 3 when no (cell, batch) was measured, 4 when some failed
        code, line = outcome.judge(resume.newest(self.records))
        if line:
            say(line)
        return code

    def _progress(self, cell, what):
        if not self.args.quiet:
            say(f"[{self.passes} recorded] {cells.label(cell)}: {what}  ({time.monotonic() - self.started:.0f} s)")

