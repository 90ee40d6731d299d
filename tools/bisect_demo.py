#!/usr/bin/env python
"""Prove that `asv find` names a memory regression: plant one, bisect, check the gate.

    python tools/bisect_demo.py             # ~1-2 min; prints each step's wall time
    python tools/bisect_demo.py --keep DIR  # keep the throwaway repo, env and results

1. Clone the project's HEAD (committed state) into a throwaway repository.
2. Add commits on top: two no-ops, the *planted regression*, two more no-ops. The plant
   turns off in-place gradient accumulation in the reference engine
   (harness/engine/backward.py): a VJP no longer adds into the running gradient
   (`add_to`), and every fan-in contribution allocates a fresh sum while the previous
   one is still alive: two extra gradient-sized buffers at W's accumulation (HIPS
   autograd #219, the commit the engine's notes cite).
3. Run `asv find` over the five commits with a virtualenv asv builds at each commit:
   NumPy only (the reference engine needs nothing else), our package rebuilt per
   commit, only the reference engine's rnn_fanout cell at `small` size swept (W is
   512x512 float32 = 1 MiB; its gradient gets 50 contributions).
4. Check that asv names the planted commit, and that tools/asv_gate.py fails the
   planted commit against its parent and passes the no-op before it, on the figures
   `asv find` stored.

Exit 0 when all of that holds, 1 when asv names another commit or the gate is wrong,
2 when the plant no longer applies (the engine changed: update PLANT below).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
ASV = os.path.join(os.path.dirname(sys.executable), "asv")
MACHINE = "bisect-demo"
BENCHMARK = "PeakMemory.track_backward"
ENGINE_FILE = "harness/engine/backward.py"
# In-place accumulation: the running sum (or the arriving cotangent) is written in
# place when the pass owns it. Deleting these lines leaves `acc = acc + ct`: a fresh
# buffer per arrival, the old sum still alive while the new one is filled.
PLANT_OLD = """    if acc_owned:
        acc += ct
        return previous
    if owned:
        ct += acc
        return ct, True
"""
PLANT_NEW = """    # PLANTED REGRESSION (tools/bisect_demo.py): in-place accumulation turned off.
"""
# A VJP that can add its cotangent straight into the parent's running gradient does so
# (`add_to`, since #16): without this second plant the lines above are never reached
# for W, and the plant changes nothing (measured: 2.9 MiB step peak either way).
PLANT_ADD_TO_OLD = """                acc = entry[0]
"""
PLANT_ADD_TO_NEW = """                acc = None  # PLANTED REGRESSION (tools/bisect_demo.py): no add-into
"""
PLANTS = {"PLANT_OLD": (PLANT_OLD, PLANT_NEW), "PLANT_ADD_TO_OLD": (PLANT_ADD_TO_OLD, PLANT_ADD_TO_NEW)}
SWEEP_ENV = {
    "GRADMEM_ASV_SIZE": "small",
    "GRADMEM_ASV_FRAMEWORKS": "reference",
    "GRADMEM_ASV_WORKLOADS": "rnn_fanout",
    "GRADMEM_ASV_DEVICES": "cpu",
    "GRADMEM_ASV_MODES": "eager",
    "GRADMEM_ASV_OPTIMIZER": "none",
}


class PlantError(RuntimeError):
    pass


def sh(args, cwd, env=None, check=True):
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def git(repo, *args):
    return sh(["git", "-c", "user.name=bisect demo", "-c", "user.email=demo@gradmem.invalid", *args], repo).stdout.strip()


def commit(repo, message, note=None):
    if note is not None:
        with open(os.path.join(repo, "BISECT_DEMO.md"), "a", encoding="utf-8") as handle:
            handle.write(note + "\n")
        git(repo, "add", "BISECT_DEMO.md")
    git(repo, "commit", "-q", "-a", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def plant(repo):
    path = os.path.join(repo, ENGINE_FILE)
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    for name, (old, new) in PLANTS.items():
        if source.count(old) != 1:
            raise PlantError(f"{ENGINE_FILE}: the in-place accumulation lines of {name} are not there "
                             f"exactly once; the engine changed, update {name} in tools/bisect_demo.py")
        source = source.replace(old, new)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)


def build_history(work):
    """Clone HEAD and add: no-op, no-op, planted regression, no-op, no-op."""
    repo = os.path.join(work, "repo")
    sh(["git", "clone", "-q", PROJECT, repo], work)
    base = git(repo, "rev-parse", "HEAD")
    history = [("no-op 1", commit(repo, "demo: no-op 1 (notes only)", "no-op 1"))]
    history.append(("no-op 2", commit(repo, "demo: no-op 2 (notes only)", "no-op 2")))
    plant(repo)
    history.append(("PLANTED", commit(repo, "engine: accumulate fan-in gradients out of place (planted regression)")))
    history.append(("no-op 3", commit(repo, "demo: no-op 3 (notes only)", "no-op 3")))
    history.append(("no-op 4", commit(repo, "demo: no-op 4 (notes only)", "no-op 4")))
    return repo, base, history


def write_config(work, repo):
    sys.path.insert(0, PROJECT)
    from asv import util

    config = util.load_json(os.path.join(PROJECT, "asv.conf.json"), js_comments=True)
    config.update(
        repo=repo, benchmark_dir=os.path.join(repo, "benchmarks"),
        results_dir=os.path.join(work, "results"), html_dir=os.path.join(work, "html"),
        env_dir=os.path.join(work, "env"),
        # The reference engine needs NumPy only: a small env asv builds in seconds (plain
        # virtualenv: the project's `virtualenv-pinned` would add every framework).
        environment_type="virtualenv",
        matrix={"req": {"numpy": config["matrix"]["req"]["numpy"]}},
    )
    path = os.path.join(work, "asv.conf.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    return path


def demo(work):
    timings = {}
    start = time.monotonic()
    repo, base, history = build_history(work)
    planted = history[2][1]
    for label, sha in history:
        print(f"  {sha[:8]}  {label}")
    config = write_config(work, repo)
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    sh([PYTHON, os.path.join(PROJECT, "tools", "asv_machine.py"), "--machine", MACHINE,
        "--path", os.path.join(home, ".asv-machine.json")], work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADMEM_ASV_")}
    env.update(SWEEP_ENV, HOME=home)
    timings["history"] = time.monotonic() - start

    start = time.monotonic()
    # `asv find` ignores the config's launch_method: without forkserver each of the 216
    # parameter combinations costs a fresh interpreter (~0.3 s), minutes per commit.
    find = sh([ASV, "find", "--config", config, "--machine", MACHINE, "--show-stderr",
               "--launch-method", "forkserver", f"{base}..{history[-1][1]}", BENCHMARK],
              work, env, check=False)
    timings["asv find"] = time.monotonic() - start
    # asv prints the whole 216-cell grid per commit; the swept cell is the one with a figure.
    print("\n".join(line for line in find.stdout.splitlines() if "n/a" not in line and "====" not in line))
    named = [line.split(":", 1)[1].split()[0] for line in find.stdout.splitlines()
             if line.strip().lstrip("·").strip().startswith("Greatest regression found:")]
    ok = find.returncode == 0 and len(named) == 1 and planted.startswith(named[0])
    print(f"asv find named {named[0] if named else 'nothing'}; planted {planted[:8]}: "
          + ("MATCH" if ok else "MISMATCH"))

    start = time.monotonic()
    # `asv find` stores results but not the suite's description (benchmarks.json, where
    # the gate reads each benchmark's unit); `--bench just-discover` writes it, runs nothing.
    sh([ASV, "run", "--config", config, "--machine", MACHINE, "--bench", "just-discover",
        f"{planted}^!"], work, env)
    parent, before_parent = history[1][1], history[0][1]
    gate_args = [PYTHON, os.path.join(PROJECT, "tools", "asv_gate.py"), "--config", config,
                 "--machine", MACHINE, "--kinds", "memory", "--bench", BENCHMARK]
    fires = sh(gate_args + ["--base", parent, "--head", planted], work, env, check=False)
    quiet = sh(gate_args + ["--base", before_parent, "--head", parent], work, env, check=False)
    timings["gate"] = time.monotonic() - start
    print("gate, planted vs its parent (must fail):\n" + fires.stdout + fires.stderr)
    print("gate, no-op 2 vs no-op 1 (must pass):\n" + quiet.stdout + quiet.stderr)
    ok = ok and fires.returncode == 1 and quiet.returncode == 0
    print("wall times: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temporary directory)")
    args = parser.parse_args(argv)
    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="gradmem-bisect-")
    os.makedirs(work, exist_ok=True)
    try:
        return 0 if demo(work) else 1
    except PlantError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
