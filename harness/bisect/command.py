"""`python -m harness bisect`: the first release (or commit) of a framework that moved a figure.

    python -m harness bisect --workload rnn_fanout --framework jax --good 0.8.3 --bad 0.10.2
    python -m harness bisect --workload rnn_fanout --framework autograd \\
        --repo ~/src/autograd --good v1.7.0 --bad master

Stage 1 (releases, no --repo): the released versions between --good and --bad on the
package index, each measured in its own cached environment (harness/versions/envs.py).
Stage 2 (commits, --repo PATH): the first-parent commits between two revisions of a
checkout, each installed into an environment of its own (pure-Python frameworks such as
HIPS autograd straight from the commit; compiled ones through --build-hook CMD, which
must turn a checkout of the commit into a wheel in $GRADMEM_WHEEL_DIR). Stage 1 prints
the release tags (and, for torch, the commits its wheels were built from) to start
stage 2 from.

One memory pass per probe (memory is near-deterministic); --metric time adds the time
pass. --metric names a figure of the registry (harness/figures.py; the older names in
parentheses are still accepted): the step peak or one phase of it (step_peak (total),
step_peak.forward (forward), step_peak.backward (backward, the default), step_peak.step
(step)), footprint (retained + step peak), retained (the framework's own memory kept
between steps), code_pages (library pages the steps paged in), first_step_peak
(first_step) / first_step_footprint (first_footprint): the cold first step's peak /
retained + peak, compiling, tracing and caches, what "the first epoch needs 6 GB"
reports are about; or time (median of the timed steps, total; default threshold 10 %
instead of 5 %). The
two candidates at the boundary are measured again to confirm. Every probe's figure is
printed as it is made.

Exit codes: 0 a first bad release/commit is named; 1 good and bad do not differ by
more than the threshold (both figures are printed); 2 bad input (unknown version or
revision, good == bad, a wrong name); 3 the bisection could not decide (good or bad
could not be measured, or candidates that cannot be installed hide the step: the range
left is printed). SIGTERM/SIGHUP/Ctrl-C kill the running worker or installer and exit
128 + the signal.
"""

import shutil
import tempfile
import time

from harness import choices, figures, frameworks, workloads
from harness.console import say
from harness.report.fmt import signed_percent
from harness.frameworks.base import Unavailable
from harness import cli_options, interrupts
from harness.sweep import environment
from harness.sweep.worker_process import run_worker
from harness.bisect import bisection, findings
from harness.versions import code_link, commits, envs, index, spec
from harness.steps import contract as native
from harness.units import MIB

#: the figures `--metric` takes: the registry's names of those it lists (harness/figures.py,
#: BISECT); the older names (total, backward, first_step ...) are still accepted
METRICS = tuple(figure.name for figure in figures.listed(figures.BISECT))
DEFAULT_METRIC = "step_peak.backward"

def add_arguments(parser):
    cli_options.add_axes(
        parser, workload=cli_options.REQUIRED, framework=cli_options.REQUIRED, size="small", dtype="float32",
        device="cpu", mode="eager", single=tuple(cli_options.AXES),
        notes={"framework": "the framework to bisect (a name, no version)"},
    )
    parser.add_argument("--good", required=True, help="a release (stage 1) or revision with --repo (stage 2) that is good")
    parser.add_argument("--bad", required=True, help="a later release or revision that is bad")
    parser.add_argument("--metric", default=DEFAULT_METRIC,
                        help=f"{'|'.join(METRICS)} (default {DEFAULT_METRIC}; older names such as total, backward, "
                             f"first_step still accepted)")
    parser.add_argument(
        "--threshold", type=float, default=None,
        help="relative change that counts (default 0.05 for memory, 0.10 for time)",
    )
    parser.add_argument("--repo", default=None, help="a git checkout of the framework: bisect its commits (stage 2)")
    parser.add_argument(
        "--build-hook", default=None,
        help="shell command turning a checkout of a commit (its cwd) into a wheel in $GRADMEM_WHEEL_DIR "
        "(compiled frameworks in stage 2)",
    )
    cli_options.add_optimizer(parser)
    parser.add_argument("--torch-index", default=None, help="where torch releases may come from (see `run --help`)")
    cli_options.add_timeout(parser, 600.0)
    parser.add_argument("--seed", type=int, default=0, help="seed of the workload's inputs (default 0)")
    parser.add_argument(
        "--record", default=None,
        help="add the finding to this JSON list (e.g. releases/FRAMEWORK.commits.json: the release page names "
             "the commit beside its change)",
    )
    parser.add_argument(
        "--releases", default=None,
        help="GOOD,BAD: the releases --good and --bad are, where their tags do not say (default: read from the tags)",
    )


def check_arguments(args):
    """The adapter; ChoiceError for every bad name or value."""
    args.workload = workloads.resolve(args.workload)  # a built-in name, a .py file or module:attr
    name, version = spec.parse_item(args.framework, frameworks.NAMES)
    if version is not None:
        raise choices.ChoiceError(f"--framework {args.framework}: name the framework alone; versions go to --good/--bad")
    choices.check_choice("size", args.size, choices.SIZES)
    choices.check_choice("dtype", args.dtype, choices.DTYPES)
    choices.check_choice("mode", args.mode, choices.MODES)
    choices.check_choice("device", args.device, choices.DEVICES)
    choices.check_choice("metric", figures.resolve(args.metric) or args.metric, METRICS)
    args.metric = figures.resolve(args.metric)
    if args.optimizer is not None:
        choices.check_choice("optimizer", args.optimizer, choices.OPTIMIZERS)
    if args.metric == "step_peak.step" and args.optimizer is None:
        raise choices.ChoiceError("--metric step_peak.step is the optimizer update's peak: give --optimizer "
                                  f"{'|'.join(choices.OPTIMIZERS)}")
    if args.threshold is None:
        args.threshold = 0.10 if _timed(args.metric) else 0.05
    if not 0 < args.threshold < 10:
        raise choices.ChoiceError(f"--threshold {args.threshold}: a relative change, e.g. 0.05 for 5 %")
    if args.record:
        findings.read(args.record)  # a file that is not a findings list is refused before anything is measured
    findings.releases_pair(args)
    adapter = frameworks.get(name)
    if adapter.package is None:
        raise choices.ChoiceError(f"{name} has no releases or repository of its own to bisect (it is gradmem's engine)")
    adapter.check_mode(args.mode)
    step = workloads.native(args.workload)
    if step is not None:  # its own row only (harness/steps/contract.py)
        native.check_cell(step, workloads.label(args.workload), name, args.mode, args.size)
    return adapter


def main(args):
    adapter = check_arguments(args)
    with interrupts.handling():
        try:
            return _run(adapter, args)
        except KeyboardInterrupt as stop:
            name = getattr(stop, "signal_name", "SIGINT")
            say(f"interrupted by {name}: the running worker or installer was killed, temporary files removed")
            return getattr(stop, "exit_code", 130)


def _run(adapter, args):
    if args.repo:
        stage = CommitStage(adapter, args)
    else:
        stage = ReleaseStage(adapter, args)
    candidates = stage.candidates()  # ChoiceError: exit 2 (cli.py)
    what = metric_label(args.metric)
    print(
        f"bisect {adapter.name} {stage.kind}: {len(candidates)} candidates from {stage.name(candidates[0])} to "
        f"{stage.name(candidates[-1])}; {what} of {args.workload} {args.size} {args.dtype} {args.mode} {args.device}, "
        f"threshold {args.threshold:.0%}",
        flush=True,
    )
    workdir = None
    started = time.monotonic()
    try:
        with interrupts.deferred():
            workdir = tempfile.mkdtemp(prefix="gradmem-bisect-")
        prober = Prober(adapter, args, workdir, stage)
        result = bisection.bisect(candidates, prober.measure, args.threshold, report=lambda p: _print_probe(p, stage))
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    wall_s = time.monotonic() - started
    code = _conclude(result, stage, args, wall_s)
    if args.record and result.kind != "end_failed":
        findings.record(args.record, findings.finding(adapter, args, stage, result, wall_s))
        print(f"recorded in {args.record}", flush=True)
    return code


def metric_label(metric):
    return figures.get(metric).label


def _timed(metric):
    return figures.get(metric).unit == "seconds"


def _format(figure, metric):
    if figure is None:
        return "-"
    return f"{figure:.4f} s" if _timed(metric) else f"{figure / MIB:.2f} MiB"


def _print_probe(probe, stage):
    metric = stage.args.metric
    tag = "again" if probe.again else (probe.verdict or "end")
    text = f"  {stage.name(probe.candidate):<60} {_format(probe.figure, metric):>14}  {tag}"
    if probe.figure is None:
        text += f"  ({probe.message.strip().splitlines()[0][:160] if probe.message.strip() else 'failed'})"
    print(text, flush=True)


def _conclude(result, stage, args, wall_s):
    metric = args.metric
    good, bad = _format(result.good_figure, metric), _format(result.bad_figure, metric)
    if result.kind == "end_failed":
        say(f"cannot bisect: {result.message}")
        return 3
    change = signed_percent(result.change) if result.change is not None else "?"
    if result.kind == "no_difference":
        print(
            f"no difference beyond {args.threshold:.0%}: good {stage.name(result.probes[0].candidate)} {good}, "
            f"bad {stage.name(result.probes[1].candidate)} {bad} ({change})",
            flush=True,
        )
        return 1
    if result.kind == "range":
        print(
            f"the step ({change}) lies after {stage.name(result.last_good)} in one of these, which could not be "
            f"measured: {', '.join(stage.name(c) for c in result.suspects)}",
            flush=True,
        )
        return 3
    print(
        f"first bad {stage.singular}: {stage.name(result.first_bad, full=True)}\n"
        f"last good {stage.singular}: {stage.name(result.last_good, full=True)}\n"
        f"{metric_label(metric)}: good {good} -> bad {bad} ({change}); "
        f"{len(result.probes)} measurements in {wall_s:.0f} s"
        + ("" if result.confirmed else "\nwarning: the boundary's second measurement did not repeat the first verdicts"),
        flush=True,
    )
    stage.next_step(result)
    return 0


class ReleaseStage:
    kind, singular = "releases", "release"

    def __init__(self, adapter, args):
        self.adapter, self.args = adapter, args

    def candidates(self):
        good = spec.check_version(self.args.good, "--good")
        bad = spec.check_version(self.args.bad, "--bad")
        package = self.adapter.package
        if index.parse(good) == index.parse(bad):
            raise choices.ChoiceError(f"--good and --bad are the same version ({good}): nothing to bisect")
        for option, version in (("--good", good), ("--bad", bad)):
            if envs.cached(f"{self.adapter.name}-{version}") is None:
                try:
                    index.check_exists(package, version, what=f"{option} {self.adapter.name}")
                except index.IndexError_ as err:
                    raise choices.ChoiceError(str(err)) from None
        if index.parse(good) > index.parse(bad):
            raise choices.ChoiceError(f"--good {good} is newer than --bad {bad}: give the older release as --good")
        return [good] + index.between(package, good, bad) + [bad]

    def name(self, candidate, full=False):
        return f"{self.adapter.name}=={candidate}"

    def environment(self, candidate):
        return envs.for_version(self.adapter, candidate, self.args.torch_index)

    def next_step(self, result):
        """Where stage 2 starts: the two releases' tags, and torch's build commits."""
        name = self.adapter.name
        a, b = result.last_good, result.first_bad
        hint = (
            f"stage 2: python -m harness bisect --workload {self.args.workload} --framework {name} "
            f"--repo CHECKOUT --good <tag of {a}> --bad <tag of {b}> --metric {self.args.metric}"
        )
        if not self.adapter.installs_from_source:
            hint += " --build-hook CMD"
        commits_ = [(envs.cached(f"{name}-{v}") or envs.Env("", {})).versions.get("torch.git_version") for v in (a, b)]
        if all(commits_):
            hint += f"\n  {name} {a} and {b} wheels were built from {commits_[0][:12]} and {commits_[1][:12]}: " \
                    f"git log --oneline {commits_[0][:12]}..{commits_[1][:12]}"
        else:
            hint += f"\n  commit range: git log --oneline v{a}..v{b} (or {name}-v{a}..{name}-v{b}) in a checkout"
        print(hint, flush=True)


class CommitStage:
    kind, singular = "commits", "commit"

    def __init__(self, adapter, args):
        self.adapter, self.args = adapter, args
        self.repo = args.repo
        self._names = {}

    def candidates(self):
        commits.check_repo(self.repo)
        good = commits.resolve(self.repo, self.args.good, "--good")
        bad = commits.resolve(self.repo, self.args.bad, "--bad")
        if self.args.build_hook is None and not self.adapter.installs_from_source:
            raise choices.ChoiceError(
                f"{self.adapter.name} is compiled: stage 2 installs each commit through --build-hook CMD (a command "
                f"that turns a checkout of the commit into a wheel in $GRADMEM_WHEEL_DIR); frameworks that install "
                f"from a commit as they are: "
                + ", ".join(n for n in frameworks.NAMES if frameworks.get(n).installs_from_source)
            )
        return commits.between(self.repo, good, bad)

    def name(self, candidate, full=False):
        """"HASH12 subject" (cut to fit a probe's line unless `full`)."""
        if candidate not in self._names:
            self._names[candidate] = commits.short(self.repo, candidate)
        return self._names[candidate] if full else self._names[candidate][:60]

    def environment(self, candidate):
        return commits.environment(self.adapter, self.repo, candidate, self.args.build_hook)

    def next_step(self, result):
        pass


class Prober:
    """One figure per candidate: its environment, then a memory pass (and a time pass
    for --metric time) in a fresh worker of that environment's Python."""

    def __init__(self, adapter, args, workdir, stage):
        self.adapter, self.args, self.workdir, self.stage = adapter, args, workdir, stage
        self.count = 0

    def measure(self, candidate):
        try:
            env_ = self.stage.environment(candidate)
        except Unavailable as err:
            return None, f"unavailable: {err}"
        args = self.args
        cell = {
            "workload": args.workload, "size": args.size, "dtype": args.dtype, "framework": self.adapter.name,
            "mode": args.mode, "device": args.device, "optimizer": args.optimizer, "remat": "none", "order": None,
        }
        job = {
            "cell": cell, "seed": args.seed, "optimizer": args.optimizer, "lr": 1e-3, "warmup": 1, "repeat": 5,
            "memory_limit": None, "kind": "memory", "tracemalloc": False,  # no figure of --metric needs it
            "reference_gradient_path": None,
        }
        outcome = self._pass(job, "memory", env_)
        if not outcome.ok:
            return None, f"memory pass {outcome.status}: {outcome.message}"
        if _timed(args.metric):
            outcome = self._pass(dict(job, kind="time"), "time", env_)
            if not outcome.ok:
                return None, f"time pass {outcome.status}: {outcome.message}"
        return figure(outcome.result, args.metric, job["cell"]["device"])

    def _pass(self, job, kind, env_):
        env, _ = environment.worker_environment(self.adapter, kind)
        env = code_link.worker_environment(env, self.workdir, env_.paths)
        self.count += 1
        return run_worker(job, env, self.workdir, f"{self.count:03d}-{kind}", self.args.timeout, python=env_.python)


def figure(result, metric, device="cpu"):
    """(figure, "") of a worker's result on `device`, or (None, why)."""
    value = figures.value({**result, "device": device, "status": "ok"}, metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None, f"the pass measured no {metric_label(metric)} (keys: {', '.join(sorted(result))[:200]})"
    return float(value), ""

