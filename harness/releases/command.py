"""`python -m harness releases`: every release of a framework in a range, measured, and its changes found.

    python -m harness releases --framework autograd --from 1.5 --repeats 3 --keep-envs
    python -m harness releases --framework jax --from 0.4.38 --workload chained_dot,unet --mode eager

The releases come from the package index (PyPI's JSON API, else `pip index versions`;
yanked ones are skipped and named; pre-releases never). Each release is measured in
its cached environment (harness/versions/envs.py, built on first use; an old release
that does not load with the pinned NumPy gets the newest older NumPy/SciPy it loads
with, harness/versions/era.py) by `harness run` itself: every cell a fresh worker per
pass, --repeats rounds one after another (each round a sweep of its own, so the rounds
measure the run-to-run band the detector needs). A release that cannot be installed or
loaded is a recorded `unavailable` with pip's or Python's last lines, and the sweep
goes on. Then the changes between consecutive releases (harness/releases/detect.py)
and the page (harness/releases/page.py) are written beside the records
(harness/releases/store.py). `--page-only` writes those two again from the records.

After a release is measured its environment is deleted unless --keep-envs (only an
environment this sweep built; one that was cached before is left). SIGTERM, SIGHUP or
Ctrl-C stop the running sweep as `harness run` does (every finished record kept);
`--resume` measures only what is missing. `--leak-pass` measures the growth per step
of a store whose records lack it (harness/releases/leak_pass.py). Exit 0 when the
sweep ran (cells that failed are records), 2 for bad input, 128 + the signal when stopped.
"""

import os
import subprocess
import sys
import time

from harness import choices, cli_options, frameworks, results, workloads
from harness.frameworks.base import Unavailable
from harness import interrupts
from harness.sweep import api as sweep
from harness.sweep import cells, outcome
from harness.sweep import resume
from harness.sweep.cell_runner import Options
from harness.releases import confirm, detect, leak_pass, listing, page, side_by_side, store
from harness.results import write_text_atomic
from harness.upstream import store as upstream_store
from harness.versions import envs, index, spec

DEFAULT_OUT = "releases"
#: what --retry may measure again: every status but ok
RETRYABLE = tuple(s for s in results.STATUSES if s != "ok")
CONFIRM_SCOPES = ("all", "large")


def add_arguments(parser):
    cli_options.add_axes(
        parser, framework=cli_options.REQUIRED, workload="all", mode=None, size="small", dtype="float32",
        single=("framework", "size", "dtype"),
        notes={"framework": "the framework whose releases are swept (a name alone)",
               "mode": "default: every mode the framework's adapter implements"},
    )
    parser.add_argument("--from", dest="first", default=None, help="the oldest release to sweep (default: the first)")
    parser.add_argument("--to", dest="last", default=None, help="the newest release to sweep (default: the newest)")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"rounds per release: its run-to-run band (default {store.DEFAULT_ROUNDS}; "
                             f"{leak_pass.DEFAULT_ROUNDS} with --leak-pass)")
    parser.add_argument("--time-repeat", type=int, default=3, help="timed steps per cell, at least (default 3)")
    parser.add_argument(
        "--time-budget", action=cli_options.seconds_action(zero_ok=True), default=1.0,
        help="seconds of timed steps per cell beyond which no more are added (default 1; time is advisory here)",
    )
    cli_options.add_timeout(parser, 600.0)
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"directory of the records and page (default {DEFAULT_OUT})")
    parser.add_argument("--resume", action="store_true", help="measure only the cells without a record in --out")
    parser.add_argument("--retry", default=None, metavar="STATUS[,STATUS]",
                        help=f"with --resume: measure again the cells recorded with these statuses "
                             f"({'|'.join(RETRYABLE)}; e.g. unavailable after the host gained a Python, error after "
                             f"an adapter fix)")
    parser.add_argument("--keep-envs", action="store_true", help="keep each release's environment after it is measured")
    parser.add_argument(
        "--torch-index", default=None,
        help="torch only: where its releases are installed from, an index URL (the PyTorch CPU index) or 'pypi' "
             "(the CUDA builds, several GB each); without it every torch release is unavailable, never downloaded",
    )
    parser.add_argument(
        "--python", default=None, metavar="SPEC",
        help="build every release with a Python of this host that the PEP 440 specifier admits, e.g. '<3.11' "
             "(torch 2.0's torch.compile refuses 3.11, which its wheels support); give such a store its own --out "
             "and GRADMEM_ENV_DIR (default: the running Python, another only where a release requires it)",
    )
    parser.add_argument("--page-only", action="store_true", help="measure nothing: write the changes and page again")
    parser.add_argument(
        "--confirm", action="store_true",
        help="measure nothing new in the sweep: measure each flagged memory change of the store again, its two "
             "releases interleaved (A B A B ..., fresh workers), and list it as a change only if that holds "
             "(harness/releases/confirm.py); --workload/--mode/--from/--to narrow which changes",
    )
    parser.add_argument(
        "--confirm-scope", default="all",
        help="with --confirm: all (every flagged memory change) | large (those whose flagged move is at least "
             f"{confirm.ACT_RELATIVE * 100:.0f}%% and {confirm.ACT_BYTES // detect.MIB} MiB{confirm.OWN_SIZES})",  # %%: argparse formats help
    )
    parser.add_argument(
        "--leak-pass", action="store_true",
        help="measure nothing else: the growth per step of every release x workload x mode the store holds whose "
             "records lack it, --repeats memory passes each (their leak phase) in the release's environment, "
             "resumable, into FRAMEWORK.leak.jsonl; then the changes and page (harness/releases/leak_pass.py); "
             "--workload/--mode/--from/--to narrow it",
    )
    parser.add_argument(
        "--measure-again", default=None, metavar="REASON",
        help="with --confirm and --workload/--mode/--from/--to: withdraw the side-by-side samples held for the "
             "pairs those name (moved to FRAMEWORK.confirm.withdrawn.jsonl, each with REASON, e.g. 'measured with "
             "stale bytecode') and measure the pairs anew; with --resume and --from/--to (--workload/--mode "
             "narrow it): the sweep's records of those releases, every round, moved to FRAMEWORK.withdrawn.jsonl, "
             "and swept anew; for figures known to be wrong, never to redraw a verdict",
    )
    parser.add_argument("--pairs", type=int, default=confirm.PAIRS,
                        help=f"with --confirm: interleaved pairs per change (default {confirm.PAIRS}); a store "
                             f"holding fewer is measured on to this many")
    parser.add_argument("--max-pairs", type=int, default=confirm.MAX_PAIRS,
                        help=f"with --confirm: pairs a figure still undecided after --pairs is measured on to "
                             f"(default {confirm.MAX_PAIRS})")
    parser.add_argument(
        "--executor", default="local",
        help="local (default) | ray: each round's passes as Ray tasks; every node builds the release's "
             "environment in its own cache (docs/ray.md)",
    )
    parser.add_argument("--address", default=None, help="with --executor ray: the cluster (default: one started here)")


def check(args):
    """The adapter and the modes; ChoiceError (exit 2) for every bad value."""
    name, version = spec.parse_item(args.framework, frameworks.NAMES)
    if version is not None:
        raise choices.ChoiceError(f"--framework {args.framework}: name the framework alone; the range is --from/--to")
    adapter = frameworks.get(name)
    if adapter.package is None:
        pinnable = [n for n in frameworks.NAMES if frameworks.get(n).package]
        raise choices.ChoiceError(f"{name} has no releases (its code is gradmem's own); frameworks with releases: "
                                  f"{', '.join(pinnable)}")
    if args.measure_again is not None:
        _check_measure_again(args)
    modes = choices.parse_choices("mode", args.mode, choices.MODES) if args.mode else list(adapter.modes)
    for mode in modes:
        adapter.check_mode(mode)
    args.mode = ",".join(modes)
    choices.check_choice("size", args.size, choices.SIZES)
    choices.check_choice("dtype", args.dtype, choices.DTYPES)
    # a native step is a cell in its own framework's row only: refused here, not at each release
    cells.expand(workloads.parse(args.workload), [name], [args.size], [args.dtype], ["cpu"], modes)
    for option, text in (("--from", args.first), ("--to", args.last)):
        if text is not None:
            spec.check_version(text, option)
    choices.check_choice("executor", args.executor, sweep.EXECUTORS)
    if args.torch_index is not None and not adapter.index_must_be_named:
        raise choices.ChoiceError(f"--torch-index says where torch releases come from: it needs --framework torch, not {name}")
    if args.python is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(args.python)
        except InvalidSpecifier:
            raise choices.ChoiceError(f"--python {args.python!r} is not a PEP 440 version specifier "
                                      f"(e.g. '<3.11', '==3.10.*', '>=3.12')") from None
        if args.executor == "ray":  # a Ray node builds its environments in a process of its own
            raise choices.ChoiceError("--python holds in this process only: not with --executor ray")
    if args.address is not None and args.executor != "ray":
        raise choices.ChoiceError("--address is the Ray cluster's: it needs --executor ray")
    args.retry = tuple(choices.parse_choices("retry status", args.retry, RETRYABLE)) if args.retry else ()
    if args.retry and not args.resume:
        raise choices.ChoiceError("--retry re-measures cells of an existing sweep: it needs --resume")
    if args.confirm and (args.page_only or args.resume):
        raise choices.ChoiceError("--confirm measures an existing store's flagged changes: not with --page-only "
                                  "or --resume (it resumes by itself)")
    if args.leak_pass and (args.page_only or args.resume or args.confirm):
        raise choices.ChoiceError("--leak-pass measures an existing store's growth per step: not with --page-only, "
                                  "--resume (it resumes by itself) or --confirm (run that after it)")
    if args.repeats is None:
        args.repeats = leak_pass.DEFAULT_ROUNDS if args.leak_pass else store.DEFAULT_ROUNDS
    choices.check_choice("confirm scope", args.confirm_scope, CONFIRM_SCOPES)
    if args.pairs < confirm.PAIRS or args.max_pairs < args.pairs:
        # fewer pairs can never confirm: 4 against 4 give at best p = 1/70 > ALPHA
        raise choices.ChoiceError(f"--pairs must be >= {confirm.PAIRS} (fewer pairs can never give p <= "
                                  f"{confirm.ALPHA}) and --max-pairs >= --pairs")
    if args.repeats < 1 or args.time_repeat < 1 or args.time_budget < 0:
        raise choices.ChoiceError("--repeats and --time-repeat must be >= 1, --time-budget >= 0")
    return adapter


def _check_measure_again(args):
    if not (args.confirm or args.resume):
        raise choices.ChoiceError("--measure-again withdraws what a store holds and measures it anew: with --confirm "
                                  "the side-by-side samples of the pairs named, with --resume the sweep's records of "
                                  "the releases named")
    if not args.measure_again.strip():
        raise choices.ChoiceError("--measure-again needs a reason, kept with every sample or record it withdraws "
                                  "(e.g. 'measured with stale bytecode')")
    if args.confirm and args.workload == "all" and args.mode is None and args.first is None and args.last is None:
        raise choices.ChoiceError("--measure-again withdraws the samples of the pairs named: name them with "
                                  "--workload, --mode, --from or --to (a whole store's confirmation is hours of "
                                  "measuring)")
    if args.resume and (args.first is None or args.last is None):
        raise choices.ChoiceError("--resume --measure-again withdraws the sweep records of the releases named: name "
                                  "them with --from and --to (a whole store's sweep is hours of measuring)")
    if args.retry:
        raise choices.ChoiceError("--measure-again measures every record of the cells named again; --retry only "
                                  "those of some statuses: one or the other")


def main(args):
    adapter = check(args)
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.page_only:
        return _publish(adapter, args)
    envs.require_python(args.python)
    if args.confirm:
        return _confirm(adapter, args)
    if args.leak_pass:
        return _leak_pass(adapter, args)
    try:
        releases, source = listing.published(adapter.package)
    except index.IndexError_ as err:
        raise choices.ChoiceError(str(err)) from None
    chosen = listing.in_range(releases, args.first, args.last)
    if not chosen:
        raise choices.ChoiceError(
            f"no release of {adapter.package} from {args.first or 'the first'} to {args.last or 'the newest'}; "
            f"released: {', '.join(r.version for r in releases[-8:])}"
        )
    yanked = [r for r in chosen if r.yanked]
    sweep = [r for r in chosen if not r.yanked]
    print(f"{adapter.name}: {len(sweep)} releases from {sweep[0].version} to {sweep[-1].version} ({source})", flush=True)
    for release in yanked:
        print(f"  skipped {release.version}: yanked ({release.yanked})", flush=True)
    existing = (resume.records_in(store.merged_path(out, adapter.name))
                + resume.records_in(store.round_path(out, adapter.name, 1)))
    if existing and not args.resume:
        raise choices.ChoiceError(
            f"{store.merged_path(out, adapter.name)} already holds {adapter.name} records: --resume to measure only "
            f"what is missing, or another --out"
        )
    store.seed_rounds(out, adapter.name, args.repeats)
    if args.measure_again:
        _withdraw(adapter, sweep, args)
    started = time.monotonic()
    with interrupts.handling():
        try:
            for number, release in enumerate(sweep, 1):
                code = _measure_release(adapter, release, args, f"[{number}/{len(sweep)}]")
                if code:
                    store.merge(out, adapter.name, args.repeats)
                    print(f"stopped: the records so far are in {store.merged_path(out, adapter.name)}; "
                          f"rerun with --resume{' (without --measure-again)' if args.measure_again else ''}",
                          flush=True)
                    return code
        except KeyboardInterrupt as stop:
            store.merge(out, adapter.name, args.repeats)
            return getattr(stop, "exit_code", 130)
    store.merge(out, adapter.name, args.repeats)
    store.write_meta(out, adapter.name, {"releases": [r.version for r in sweep], "yanked": {r.version: r.yanked for r in yanked},
                                          "uploaded": {r.version: r.uploaded for r in chosen}, "source": source,
                                          "last_sweep_wall_s": round(time.monotonic() - started, 1),
                                          "grid": {"workload": args.workload, "mode": args.mode, "size": args.size,
                                                   "dtype": args.dtype, "repeats": args.repeats}})
    return _publish(adapter, args)


def _withdraw(adapter, sweep, args):
    """--resume --measure-again: every record of the cells named at each release of
    `sweep`, all rounds, moved to FRAMEWORK.withdrawn.jsonl with the reason, before
    anything is measured (so a stopped run goes on with --resume alone); the loop then
    finds them missing and measures them anew."""
    out, name = args.out, adapter.name
    at = time.strftime("%Y-%m-%dT%H:%M:%S")
    taken = sum(store.withdraw(out, name, release.version, {resume.key(c) for c in _cells(adapter, release.version, args)},
                               args.measure_again, at)
                for release in sweep)
    store.merge(out, name, args.repeats)
    print(f"{name}: {taken} record(s) of {len(sweep)} release(s) withdrawn to "
          f"{store.sweep_withdrawn_path(out, name)} ({args.measure_again}); measured anew", flush=True)


def _cells(adapter, release, args):
    """The cells of one round of `release`, planned without asking pip's index about it:
    PyPI's JSON lists releases pip will not install here (JAX 0.11+ needs Python 3.12),
    which are then `unavailable` records, not a refusal of the whole sweep."""
    return cells.expand(
        workloads.parse(args.workload), [(adapter.name, release)], [args.size], [args.dtype], ["cpu"],
        choices.parse_choices("mode", args.mode, choices.MODES),
    )


def round_options(args):
    """The measurement settings of every round: `harness run`'s defaults but the time
    pass's, which is advisory here (--time-repeat, --time-budget), and --timeout."""
    return Options(repeat=args.time_repeat, time_budget_s=args.time_budget, timeout_s=args.timeout,
                   torch_index=args.torch_index)


def round_how(args):
    """How each round's sweep runs: it resumes its round file, quietly (the rounds
    print their counts); its default schedule, serial here, parallel on Ray."""
    return sweep.How(resume=True, quiet=True, executor=args.executor, address=args.address)


def _missing(round_file, todo):
    done = {resume.key(r) for r in resume.records_in(round_file)}
    return [cell for cell in todo if resume.key(cell) not in done]


def _measure_release(adapter, release, args, where):
    out, name, version = args.out, adapter.name, release.version
    first = store.round_path(out, name, 1)
    todo = _cells(adapter, version, args)
    if args.retry:
        store.forget(out, name, version, args.retry, {resume.key(cell) for cell in todo})
    first_missing = _missing(first, todo)
    unavailable = not first_missing and all(
        r.get("status") == "unavailable" for r in resume.records_in(first) if r.get("version") == version)
    rounds_missing = [k for k in range(1, args.repeats + 1)
                      if _missing(store.round_path(out, name, k), todo)]
    if unavailable or not rounds_missing:
        print(f"{where} {name}=={version}: already measured", flush=True)
        return 0
    was_cached = envs.cached(f"{name}-{version}") is not None
    began = time.monotonic()
    try:
        env_ = envs.for_version(adapter, version, torch_index=args.torch_index, requires_python=release.requires_python)
    except Unavailable as err:
        if release.requires_python and "requires Python" not in str(err):  # pip's "No matching distribution" does not say why
            err = Unavailable(f"{err}\n(PyPI: {name} {version} requires Python {release.requires_python}; this is "
                              f"{sys.version.split()[0]})")
        for cell in todo:
            results.append_record(first, results.new_record(cell, "unavailable", str(err), {"versions": {}}))
        store.write_env(out, name, version, {"unavailable": str(err)[-1500:]})
        print(f"{where} {name}=={version}: unavailable: {str(err).splitlines()[0][:200]}", flush=True)
        return 0
    build_s = None if was_cached else round(time.monotonic() - began, 1)
    info = {"versions": env_.versions, "dependency_differs": env_.manifest.get("dependency_differs") or {},
            "era_reason": env_.manifest.get("era_reason"), "disk_bytes": _disk(env_.path),
            "python": env_.manifest.get("python"),
            # of those, bytes hard-linked to the framework's other environments (shared_files)
            "shared_bytes": env_.manifest.get("shared_bytes")}
    if build_s is not None:
        info["build_s"] = build_s
    store.write_env(out, name, version, info)
    measured = time.monotonic()
    for number in rounds_missing:
        round_file = store.round_path(out, name, number)
        os.makedirs(os.path.dirname(round_file), exist_ok=True)
        code = sweep.run(todo, round_options(args), round_file, round_how(args))
        if code not in outcome.RAN_TO_THE_END:  # stopped; a round whose cells failed is records
            return code
        mine = [r for r in resume.records_in(round_file) if r.get("version") == version]
        counts = {s: sum(1 for r in mine if r.get("status") == s) for s in results.STATUSES}
        print(f"{where} {name}=={version} round {number}/{args.repeats}: "
              + ", ".join(f"{n} {s}" for s, n in counts.items() if n), flush=True)
        store.merge(out, name, args.repeats)
    store.write_env(out, name, version, {"measure_s": round(time.monotonic() - measured, 1)})
    if not args.keep_envs and not was_cached:
        if envs.remove(env_.path):
            store.write_env(out, name, version, {"pruned": True})
        else:
            print(f"{where} {name}=={version}: environment kept, another process is using it", flush=True)
    return 0


def _disk(path):
    """Bytes the environment takes on disk (du: hard links once)."""
    try:
        done = subprocess.run(["du", "-sk", path], capture_output=True, text=True, timeout=300)
        return int(done.stdout.split()[0]) * 1024
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def _publish(adapter, args):
    out, name = args.out, adapter.name
    records = resume.records_in(store.merged_path(out, name))
    if not records:
        raise choices.ChoiceError(f"{store.merged_path(out, name)}: no records to publish; run the sweep first")
    leak = resume.records_in(store.leak_path(out, name))
    report = _report(out, name, records, args.size, leak)
    results.write_json_atomic(store.changes_path(out, name), report)
    path = os.path.join(out, f"{name}.html")
    write_text_atomic(path, page.render(name, records, report, store.read_envs(out, name), store.read_meta(out, name),
                                        upstream=upstream_store.read_outcomes(out, name), leak=leak,
                                        swept_again=store.measured_again(
                                            resume.records_in(store.sweep_withdrawn_path(out, name)))))
    print(detect.summary(report), flush=True)
    print(confirm.summary(report), flush=True)
    print(f"records {store.merged_path(out, name)}; changes {store.changes_path(out, name)}; page {path}", flush=True)
    return 0


def _report(out, name, records, size, leak=None):
    """The changes document of the store's records (and of the growth per step of its
    leak-only pass's records, `leak`: read from the store where not given), each change
    with its confirmation."""
    env_info, meta = store.read_envs(out, name), store.read_meta(out, name)
    size = (meta.get("grid") or {}).get("size", size)
    leak = resume.records_in(store.leak_path(out, name)) if leak is None else leak
    report = detect.report(records, detect.detect(records, leak), name, env_info, size=size,
                           commits=store.read_commits(out, name), leak=leak)
    return confirm.attach(report, resume.records_in(store.confirm_path(out, name)),
                          resume.records_in(store.withdrawn_path(out, name)))


def _leak_pass(adapter, args):
    """--leak-pass: the growth per step of the store's cells whose records lack it, then published."""
    out, name = args.out, adapter.name
    records = resume.records_in(store.merged_path(out, name))
    if not records:
        raise choices.ChoiceError(f"{store.merged_path(out, name)}: no records; run the sweep first")
    workloads_ = None if args.workload == "all" else workloads.parse(args.workload)
    planned = leak_pass.plan(records, name, workloads_, args.mode.split(","), args.first, args.last)
    print(f"{name}: growth per step of {sum(map(len, planned.values()))} cell(s) in {len(planned)} release(s), "
          f"{args.repeats} round(s) each (a leak-only pass into {store.leak_path(out, name)})", flush=True)
    runner = leak_pass.LeakPass(out, adapter, rounds=args.repeats, timeout_s=args.timeout, keep_envs=args.keep_envs,
                                torch_index=args.torch_index)
    with interrupts.handling():
        try:
            runner.run(planned)
        except KeyboardInterrupt as stop:
            _publish(adapter, args)
            print(f"stopped: the records so far are in {store.leak_path(out, name)}; rerun --leak-pass to go on",
                  flush=True)
            return getattr(stop, "exit_code", 130)
    print(leak_pass.summary(resume.records_in(store.leak_path(out, name))), flush=True)
    return _publish(adapter, args)


def _confirm(adapter, args):
    """--confirm: the store's flagged changes measured again side by side, then published."""
    out, name = args.out, adapter.name
    records = resume.records_in(store.merged_path(out, name))
    if not records:
        raise choices.ChoiceError(f"{store.merged_path(out, name)}: no records; run the sweep first")
    grid = store.read_meta(out, name).get("grid") or {}
    document = _report(out, name, records, args.size)
    workloads_ = None if args.workload == "all" else workloads.parse(args.workload)
    groups = side_by_side.wanted(document, args.confirm_scope, workloads_, args.mode.split(","), args.first, args.last)
    print(f"{name}: {len(groups)} release pair(s) to confirm side by side ({sum(map(len, groups.values()))} "
          f"flagged change(s), scope {args.confirm_scope}), {args.pairs} pairs each", flush=True)
    runner = side_by_side.SideBySide(out, name, grid.get("size", args.size), grid.get("dtype", args.dtype),
                                     timeout_s=args.timeout, keep_envs=args.keep_envs, torch_index=args.torch_index)
    with interrupts.handling():
        try:
            runner.run(groups, args.pairs, args.max_pairs, withdraw_reason=args.measure_again)
        except KeyboardInterrupt as stop:
            _publish(adapter, args)
            # a second --measure-again would withdraw what this run measured
            print(f"stopped: the samples so far are in {store.confirm_path(out, name)}; rerun --confirm "
                  f"{'(without --measure-again) ' if args.measure_again else ''}to go on", flush=True)
            return getattr(stop, "exit_code", 130)
    return _publish(adapter, args)
