#!/usr/bin/env python
"""Record asv results for past commits (history, back-filling) on the installed environment.

    .venv/bin/python tools/asv_history.py main~9..main             # every commit of a range
    .venv/bin/python tools/asv_history.py --skip-existing main~9..main
    .venv/bin/python tools/asv_history.py 4f9b671 0d099a7 -- -b PeakMemory   # asv run options

For each commit, oldest first: check the commit out in a scratch git worktree, run the
same harness sweep `tools/asv_record.sh` would run (benchmarks/common.py's command and
GRADMEM_ASV_* selection) with that commit's code (the worktree first on PYTHONPATH), check
that every record names that commit as the code it ran (provenance.git_commit), then store
the figures with `asv run -E installed:.venv/bin/python --set-commit-hash COMMIT` fed from
those records (GRADMEM_ASV_RECORDS), asv running only the swept cells' benchmark processes
(a -b pattern; the rest are n/a, as the sweep left them). The installed frameworks and
the benchmark suite are the current checkout's (as `asv run A..B` does); the environment
name records the framework versions. A commit whose benchmarks/common.py has another
VERSION is not recorded (its figures mean something else; asv would show them as one
series) unless --any-version.

The machine name is derived as in tools/asv_record.sh (tools/asv_machine.py plus the sweep
size) unless --machine is given. A commit whose sweep fails is reported and skipped; the
others go on. Exit 0 when every commit was recorded (or skipped as existing), 1 when some
failed, 2 on bad arguments.
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # benchmarks.common, asv_machine
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
ASV = os.path.join(ROOT, ".venv", "bin", "asv")

from benchmarks import common  # noqa: E402 (this checkout's suite: its sweep command and selection)


class HistoryError(RuntimeError):
    """One commit could not be recorded; the message says why."""


def git(*args, cwd=ROOT):
    done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise HistoryError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def commits(revisions):
    """Full hashes, oldest first: `A..B` ranges along first parents, single commits as given."""
    found = []
    for rev in revisions:
        if ".." in rev:
            found += git("rev-list", "--reverse", "--first-parent", rev).split()
        else:
            found.append(git("rev-parse", "--verify", f"{rev}^{{commit}}"))
    return list(dict.fromkeys(found))


def machine_name(name, size):
    import asv_machine

    info = asv_machine.describe(name, size)
    asv_machine.write(info, os.path.expanduser("~/.asv-machine.json"))
    return info["machine"]


def suite_version(tree):
    """The benchmarks' VERSION in a checkout (None when it has none)."""
    try:
        with open(os.path.join(tree, "benchmarks", "common.py"), encoding="utf-8") as handle:
            found = re.search(r"""^VERSION\s*=\s*["']([^"']+)["']""", handle.read(), re.M)
    except OSError:
        return None
    return found.group(1) if found else None


def sweep(commit, scratch, out, any_version=False):
    """The harness sweep with `commit`'s code; returns its records."""
    tree = os.path.join(scratch, commit[:12])
    git("worktree", "add", "--detach", tree, commit)
    try:
        # asv stores every figure under this suite's version; a commit whose suite had
        # another one measured figures that mean something else (common.VERSION).
        theirs = suite_version(tree)
        if theirs != common.VERSION and not any_version:
            raise HistoryError(f"its benchmarks' VERSION is {theirs!r}, this suite's is {common.VERSION!r}: "
                               f"its figures mean something else (--any-version records them anyway)")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")])))
        done = subprocess.run(common.sweep_command(out), cwd=tree, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(out):
            raise HistoryError(f"sweep failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    finally:
        git("worktree", "remove", "--force", tree)
    with open(out, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    ran = {(r.get("provenance") or {}).get("git_commit") for r in records if r.get("status") == "ok"}
    if ran != {commit}:
        raise HistoryError(f"the sweep's records name {sorted(map(str, ran)) or 'no commit'} as the code "
                           f"they ran, not {commit}: the worktree's harness was not the one imported")
    return records


def swept_cells_regex():
    """asv's -b pattern for the cells the GRADMEM_ASV_* selection sweeps (None: all).

    asv starts one benchmark process per benchmark and parameter combination (17 x 216
    with nine frameworks), even for the cells the sweep left n/a; a pattern on
    `name('workload', 'framework', 'device', 'mode')` makes it run only the swept ones
    and store the rest as n/a, as those processes would have (asv.benchmarks.Benchmarks).
    """
    axes = [common._selection(f"GRADMEM_ASV_{name.upper()}S", valid)
            for name, valid in zip(common.PARAM_NAMES, common.PARAMS)]
    if all(len(chosen) == len(valid) for chosen, valid in zip(axes, common.PARAMS)):
        return None
    cells = ", ".join("'(?:" + "|".join(map(re.escape, chosen)) + ")'" for chosen in axes)
    return rf"\({cells}\)$"


def record(commit, machine, records_path, asv_args):
    env = dict(os.environ, GRADMEM_ASV_RECORDS=records_path)
    pattern = swept_cells_regex()
    if pattern and not any(arg in ("-b", "--bench") or arg.startswith("--bench=") for arg in asv_args):
        asv_args = ["-b", pattern, *asv_args]
    done = subprocess.run([ASV, "run", "-E", f"installed:{PYTHON}", "--machine", machine,
                           "--set-commit-hash", commit, *asv_args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise HistoryError(f"asv run failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


def recorded(results_dir, machine, commit):
    return bool(glob.glob(os.path.join(results_dir, machine, f"{commit[:8]}-*.json")))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    asv_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [options] REV... [-- asv run options]")
    parser.add_argument("revisions", nargs="+", metavar="REV", help="A..B (first parents, A excluded) or commits")
    parser.add_argument("--machine", help="machine name (default: derived, plus the sweep size)")
    parser.add_argument("--skip-existing", action="store_true", help="leave commits that have results")
    parser.add_argument("--keep", metavar="DIR", help="keep each sweep's records as DIR/<commit>.jsonl")
    parser.add_argument("--any-version", action="store_true",
                        help="also record commits whose benchmarks/common.py VERSION differs from this one")
    args = parser.parse_args(argv)

    from asv.config import Config

    # A kill runs the cleanup too (the scratch worktree, its git registration).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        todo = commits(args.revisions)
        machine = machine_name(args.machine, common.size())
    except (HistoryError, common.SelectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    results_dir = os.path.join(ROOT, Config.load(os.path.join(ROOT, "asv.conf.json")).results_dir)
    print(f"{len(todo)} commit(s) on machine {machine}, size {common.size()}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="gradmem-history-") as scratch:
        for commit in todo:
            label = f"{commit[:8]} {git('log', '-1', '--format=%s', commit)[:60]}"
            if args.skip_existing and recorded(results_dir, machine, commit):
                print(f"  {label}: has results, skipped")
                continue
            out = os.path.join(args.keep or scratch, f"{commit[:8]}.jsonl")
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
            if os.path.exists(out):
                os.remove(out)  # a sweep appends
            try:
                start = time.monotonic()
                records = sweep(commit, scratch, out, args.any_version)
                swept = time.monotonic() - start
                record(commit, machine, out, asv_args)
                ok = sum(r.get("status") == "ok" for r in records)
                print(f"  {label}: {ok} of {len(records)} cells ok; sweep {swept:.0f} s, "
                      f"asv {time.monotonic() - start - swept:.0f} s")
            except HistoryError as err:
                failed.append(commit)
                print(f"  {label}: FAILED: {err}")
    if failed:
        print(f"{len(failed)} commit(s) not recorded: {' '.join(c[:8] for c in failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
