"""`python -m harness report-change`: one change of a release store, ready to file upstream.

    python -m harness report-change 'torch:rnn_fanout:compiled:retained:2.3.1->2.4.0' --torch-index pypi
    python -m harness report-change 'jax:chained_dot:compiled:step_peak:0.5.0->0.5.1'
    python -m harness report-change --framework tensorflow --actionable --limit 10

For a change (its id, as the release page and docs/releases.md show it beside each
line, or the line itself) of the store in --out (default releases/):

1. writes a standalone script, DIR/upstream/FRAMEWORK/GROUP.py: the workload's step in
   plain framework code (the op-set workload with that framework's ops inlined, or a
   native step file as written), its sizes, and the probe, which measures the figures
   as docs/measurement.md defines them; it imports only the framework, NumPy and the
   standard library;
2. runs it under both releases' environments (the store's, built again where the sweep
   pruned them), --runs fresh processes each, interleaved, and judges every confirmed
   figure of the step: reproduced standalone (the same direction, at least half the
   size); where it does not, gradmem's own memory pass of the same cells runs beside it
   (harness/upstream/control.py; --no-control skips it) and tells harness only (the
   harness still shows the move) from not reproduced here (neither does: the store's
   confirmation does not hold on this machine) (harness/upstream/verdict.py); a harness-only
   move is run again in the loss's other forms until one shows it: each op a small
   function (DIR/upstream/FRAMEWORK/GROUP.functions.py), then the code as written through
   an op table, as gradmem runs it (GROUP.table.py); --no-forms skips them: reproduced
   there, the loss's form is what makes it; the outcome goes to
   DIR/FRAMEWORK.upstream.json, each run to DIR/FRAMEWORK.upstream.jsonl;
3. writes the report draft, DIR/upstream/FRAMEWORK/GROUP.md, and the framework's page
   again, whose line for the change then says "reproduced standalone" or "harness only".

`--write-only` writes the script and the draft and runs nothing (with --actionable: those
of every group run so far, again); `--rejudge` judges the groups run so far again from
the runs they hold. `--framework F
--actionable` does it for every group of F's store with an actionable change, cheapest
first (harness/upstream/batch.py), skipping groups already judged for their current
script (`--retry` runs failed and unavailable ones again); `--limit N` and `--budget S`
stop it after N groups or once S seconds have passed (the group under way finishes).
SIGTERM/SIGHUP/Ctrl-C stop it with every finished run kept.

Exit: 0 done (a change that did not reproduce is a finding, not an error); 2 bad input
(an unknown id, a framework without scripts); 3 a group could not be run (an
environment that cannot be built, every run of a side failed): said in one line and
recorded, the other groups' work kept; 128 + the signal when stopped.
"""

import functools
import os
import sys
import time

from harness import cli_options, interrupts
from harness.choices import ChoiceError
from harness.releases import detect
from harness.releases import store as release_store
from harness.upstream import batch, draft, emitters, ids, inline, report_change, runner, store, verdict
from harness.versions import envs

DEFAULT_OUT = "releases"


def add_arguments(parser):
    parser.add_argument("change", nargs="?", default=None,
                        help="the change: its id FRAMEWORK:WORKLOAD:MODE:FIGURE:BEFORE->AFTER (shown beside its line on "
                             "the release page and in docs/releases.md), or the line itself")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"the release store's directory (default {DEFAULT_OUT})")
    parser.add_argument("--framework", default=None, help="with --actionable: the store's framework")
    parser.add_argument("--actionable", action="store_true",
                        help="every group of the store with an actionable change, cheapest first (resumable)")
    parser.add_argument("--runs", type=int, default=runner.RUNS,
                        help=f"fresh runs of the script under each release (default {runner.RUNS})")
    parser.add_argument("--write-only", action="store_true", help="write the script and the draft; run nothing")
    parser.add_argument("--retry", action="store_true", help="with --actionable: run failed and unavailable groups again")
    parser.add_argument("--rejudge", action="store_true",
                        help="with --actionable: judge the groups run so far again from the runs they hold (after the "
                             "rule changed), running only what is missing")
    parser.add_argument("--limit", type=int, default=None, help="with --actionable: at most this many groups")
    parser.add_argument("--budget", action=cli_options.seconds_action(none_ok=True), default=None, metavar="SECONDS",
                        help="with --actionable: start no group after this many seconds (default: none)")
    parser.add_argument("--no-control", action="store_true",
                        help="where the script does not reproduce a move, do not run gradmem's own memory pass of the "
                             "same cells beside it (the control that tells 'harness only' from 'not reproduced here')")
    parser.add_argument("--no-forms", action="store_true",
                        help="where the script leaves a move to the harness, do not run it again in the loss's other "
                             "forms (GROUP.functions.py, each op a small function; GROUP.table.py, the code as written "
                             "through an op table, as gradmem runs it), which tell whether the loss's form makes the move")
    parser.add_argument("--keep-envs", action="store_true",
                        help="keep the environments this run built (default: each is removed after its last group)")
    parser.add_argument("--torch-index", default=None,
                        help="torch only: where a release is installed from where its environment is not built: an "
                             "index URL, or 'pypi' (the CUDA builds the store was measured with)")
    cli_options.add_timeout(parser, runner.TIMEOUT_S, "seconds one run of the script may take")


def _document(out, framework):
    path = release_store.changes_path(out, framework)
    document = _read(path)
    if not document.get("changes"):
        stores = sorted(name[:-len(".changes.json")] for name in os.listdir(out) if name.endswith(".changes.json")) \
            if os.path.isdir(out) else []
        raise ChoiceError(f"{path}: no store of {framework}'s changes (stores in {out}: "
                          f"{', '.join(stores) or 'none'})")
    document.setdefault("framework", framework)
    return document


def _read(path):
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def check(args):
    if args.runs < 2:
        raise ChoiceError("--runs must be at least 2 (a side's median needs two runs)")
    if args.limit is not None and args.limit < 1:
        raise ChoiceError("--limit must be at least 1 (groups to run)")
    if args.actionable:
        if args.change:
            raise ChoiceError("name one change, or --framework F --actionable for all of a store; not both")
        if not args.framework:
            raise ChoiceError(f"--actionable needs --framework (one of {', '.join(emitters.FRAMEWORKS)})")
        if args.framework not in emitters.FRAMEWORKS:
            raise ChoiceError(f"--framework {args.framework}: standalone scripts are written for "
                              f"{', '.join(emitters.FRAMEWORKS)} (harness/upstream/emitters.py)")
        return args.framework, None
    if args.retry or args.rejudge or args.limit is not None or args.budget is not None:
        raise ChoiceError("--retry, --rejudge, --limit and --budget go with --framework F --actionable")
    if not args.change:
        raise ChoiceError("name a change (its id, e.g. torch:rnn_fanout:compiled:retained:2.3.1->2.4.0), or "
                          "--framework F --actionable")
    framework = ids.parse(args.change)[0]
    if framework not in emitters.FRAMEWORKS:
        raise ChoiceError(f"{args.change}: a {framework} change; standalone scripts are written for "
                          f"{', '.join(emitters.FRAMEWORKS)} (harness/upstream/emitters.py)")
    return framework, args.change


def main(args):
    framework, named = check(args)
    document = _document(args.out, framework)
    if named is not None:
        change = ids.find(document, framework, named)
        if change.get("advisory"):
            raise ChoiceError(f"{ids.of(framework, change)} is advisory ({change.get('advisory_why') or 'time'}): "
                              "never a memory change to reproduce")
        if change["figure"] not in verdict.MEASURED:
            raise ChoiceError(f"{ids.of(framework, change)}: {change['figure']} is not measured by the standalone "
                              f"probe (it measures {', '.join(verdict.MEASURED)})")
        plan = [change]
    else:
        plan = batch.groups(document)
    with interrupts.handling():
        try:
            return _run(args, framework, document, plan, named is None)
        except interrupts.Interrupted as stop:
            print(f"stopped: every finished run is in {store.samples_path(args.out, framework)}; run again to go on",
                  file=sys.stderr)
            return stop.exit_code


def _write_not_standing(out, framework, document, outcomes, torch_index):
    """The drafts of groups run before whose changes are no longer actionable (withdrawn
    side by side, say), written again saying so beside their scripts as run (not
    rewritten: the runs are those scripts'); a group the sweep no longer flags at all has
    nothing to write its draft from, and its draft is marked as it stands."""
    for change in batch.held_not_actionable(document, outcomes, framework):
        group = report_change.Group(out, framework, document, change, named=True)
        if not os.path.exists(group.path(".py")):
            print(f"  {group.id}: its script {group.path('.py')} is gone; its draft is left as written", file=sys.stderr)
            continue
        draft_path = report_change.write_draft(group, group.path(".py"), torch_index)
        print(f"  draft {draft_path} ({store.standing(change)})", flush=True)
    for group_id in batch.no_longer_flagged(document, outcomes, framework):
        path = report_change.Group.path_of(out, framework, group_id, ".md")
        if os.path.exists(path) and report_change.mark_withdrawn(out, path, store.standing(None)):
            print(f"  draft {path} ({store.standing(None)})", flush=True)


def _run(args, framework, document, plan, is_batch):
    out = args.out
    env_info = release_store.read_envs(out, framework)
    confirm_records = store.read_records(release_store.confirm_path(out, framework))
    if is_batch:
        walls = batch.sample_walls(confirm_records)
        plan = batch.order(plan, env_info, walls, lambda r: report_change.cached(framework, r), args.runs)
    started, ran, failed, skipped = time.monotonic(), 0, 0, 0
    outcomes = store.read_outcomes(out, framework)
    for number, change in enumerate(plan, 1):
        group = report_change.Group(out, framework, document, change, named=not is_batch)
        if is_batch and (args.write_only or args.rejudge) and group.id not in outcomes["groups"]:
            continue  # over a store: the scripts and drafts (or the verdicts) of the groups run so far, again
        try:
            text = report_change.script_source(group)
        except inline.InlineError as err:
            print(f"error: {group.id}: {err}", file=sys.stderr)
            if not is_batch:
                return 2
            failed += 1
            continue
        if is_batch and not args.write_only and not args.rejudge:
            if batch.done(outcomes, framework, document, change, store.script_hash(text),
                          with_control=not args.no_control, with_forms=not args.no_forms,
                          form_sha=_form_sha(group)) and not (
                    args.retry and any(o.get("status") in ("failed", "unavailable")
                                       for o in outcomes["changes"].values() if o.get("group") == group.id)):
                skipped += 1
                continue
            if args.limit is not None and ran >= args.limit:
                break
            if args.budget is not None and time.monotonic() - started > args.budget:
                print(f"budget of {args.budget:.0f} s spent: stopped before {group.id}", flush=True)
                break
        script_path = report_change.write_script(group)
        print(f"[{number}/{len(plan)}] {group.id}: {script_path}", flush=True)
        if not args.write_only:
            found = report_change.measure(group, script_path, runs=args.runs, torch_index=args.torch_index,
                                          timeout_s=args.timeout or runner.TIMEOUT_S,
                                          with_control=not args.no_control, with_forms=not args.no_forms)
            ran += 1
            for change_id, outcome in found.items():
                print(f"  {change_id}: {_said(outcome)}", flush=True)
            if any(o["status"] in ("failed", "unavailable") for o in found.values()):
                failed += 1
            outcomes = store.read_outcomes(out, framework)
        draft_path = report_change.write_draft(group, script_path, args.torch_index)
        print(f"  draft {draft_path}", flush=True)
        if not args.keep_envs and is_batch:
            _prune(framework, plan[number:])
    if is_batch and args.write_only:
        _write_not_standing(out, framework, document, outcomes, args.torch_index)
    if not args.write_only:
        page = report_change.publish_page(out, framework, document)
        counted = store.tally(document, store.read_outcomes(out, framework))
        print(f"{framework}: {counted['run']} of {counted['actionable']} actionable changes run standalone: "
              f"{counted['reproduced']} reproduced, {counted['harness only']} harness only"
              + (f" ({counted['loss form']} the loss's form)" if counted["loss form"] else "")
              + f", {counted['failed']} failed, "
              f"{counted['unavailable']} unavailable" + (f" (this run: {ran} group(s), {skipped} already judged)"
                                                          if is_batch else "") + (f"; page {page}" if page else ""),
              flush=True)
    if not args.keep_envs and not is_batch:
        _prune(framework, [])
    return 3 if failed else 0


def _form_sha(group):
    """form -> the hash of `group`'s script in that form as it is written now (each
    written once, and only where a harness-only verdict asks)."""

    @functools.lru_cache(maxsize=None)
    def sha_of(form):
        return store.script_hash(report_change.script_source(group, form=form))

    return sha_of


def _said(outcome):
    words = store.label(outcome) or outcome["status"]
    if outcome.get("before") is not None:
        harness = outcome.get("harness") or {}
        figure = outcome["figure"]  # in its unit: MiB, KiB a step for the growth per step
        number = functools.partial(detect.number, figure)
        delta = outcome["delta"]
        return (f"{words}: standalone {number(outcome['before'])} -> {draft.amount(figure, outcome['after'])} "
                f"({'+' if delta >= 0 else '-'}{number(abs(delta))}, p = {outcome['p']:.3g}); "
                f"side by side {number(harness.get('before') or 0)} -> {draft.amount(figure, harness.get('after') or 0)}"
                + (f" ({outcome['why']})" if outcome.get("why") else ""))
    return f"{words}: {outcome.get('why', '')}"


def _prune(framework, remaining):
    """Remove the environments this process built that no group left in `remaining` uses."""
    needed = {r for change in remaining for r in (change["before_release"], change["release"])}
    root = envs.cache_root()
    if not os.path.isdir(root):
        return
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.startswith(f"{framework}-") or not envs.built_here(path):
            continue
        release = name[len(framework) + 1:].rsplit("-py", 1)[0]
        if release not in needed:
            envs.remove(path)
