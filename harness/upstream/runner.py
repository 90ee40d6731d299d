"""A standalone script run under both releases' environments, in fresh processes, interleaved.

The environments are the store's own (harness/versions/envs.py: one per framework
release, built with the NumPy the sweep pinned; built again where the sweep pruned it).
Each run is a fresh interpreter of that environment started isolated (``python -I``:
no PYTHONPATH, no user site, the script's folder not on the path) in an empty
directory, with a bare environment (PATH, HOME, LANG): nothing of gradmem is on its
path, and the script's own list of the modules it imported says so. Runs alternate
A B A B ..., so a load that drifts falls on both releases alike, as the side-by-side
confirmation's samples do. Each run is appended to FRAMEWORK.upstream.jsonl as it ends
(tagged with the script's hash): a stopped run goes on where it stopped, and a run of a
script that changed since is measured again.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import interrupts, origin
from harness.frameworks import get as get_adapter
from harness.frameworks.base import Unavailable
from harness.releases import detect
from harness.units import MIB
from harness.upstream import store
from harness.versions import envs

RUNS = 3
TIMEOUT_S = 1200.0
#: what a run's environment keeps of the caller's: where programs are, and the locale
KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")


def machine():
    """This machine in one line, "CPU model, N CPUs (platform)": a memory figure can move
    with the CPU (a library picks its kernels, and their buffers, by the instruction set)."""
    found = origin.machine()
    return f"{found.get('cpu_model') or '?'}, {found.get('cpus')} CPUs ({found.get('platform')})"


def environment(framework, release, torch_index=None):
    """The release's environment (built where absent), or raises Unavailable (why)."""
    return envs.for_version(get_adapter(framework), release, torch_index=torch_index)


def run_once(python, script_path, timeout_s=TIMEOUT_S):
    """(status, JSON printed or None, message, wall seconds) of one fresh run."""
    workdir = tempfile.mkdtemp(prefix="gradmem-upstream-run-")
    env = {k: os.environ[k] for k in KEPT if k in os.environ}
    started = time.monotonic()
    try:
        done = subprocess.run([python, "-I", os.path.abspath(script_path)], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "failed", None, f"timed out after {timeout_s:.0f} s", time.monotonic() - started
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    wall = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        last = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[-600:]
        return "failed", None, f"exit {done.returncode}: {last or 'no output'}", wall
    try:
        return "ok", json.loads(lines[-1]), "", wall
    except ValueError as err:
        return "failed", None, f"its last line is not JSON ({err})", wall


def held(samples, group, sha):
    """{release: {index: sample}} of the runs held for `group` made by the script `sha`."""
    found = {}
    for sample in samples:
        if sample.get("group") == group and sample.get("script_sha") == sha:
            found.setdefault(sample["release"], {})[sample["index"]] = sample
    return found


def run_group(out, framework, group, releases, script_path, runs=RUNS, torch_index=None, timeout_s=TIMEOUT_S,
              say=print):
    """Measure `script_path` under both `releases` (before, after), interleaved, up to
    `runs` ok runs a side; every run appended to the store. Returns (samples of the group
    by release, None) or (None, why) when an environment is unavailable."""
    with open(script_path, encoding="utf-8") as handle:
        sha = store.script_hash(handle.read())
    have = held(store.read_samples(out, framework), group, sha)
    todo = [(index, release) for index in range(1, runs + 1) for release in releases
            if have.get(release, {}).get(index, {}).get("status") != "ok"]
    pythons = {}
    for release in sorted({release for _, release in todo}, key=releases.index):  # built only where a run is due
        try:
            pythons[release] = environment(framework, release, torch_index).python
        except Unavailable as err:
            return None, f"{framework}=={release}: {str(err).splitlines()[0][:300]}"
    for index, release in todo:
        status, printed, message, wall = run_once(pythons[release], script_path, timeout_s)
        sample = {"group": group, "release": release, "index": index, "script_sha": sha, "status": status,
                  "machine": machine(),
                  "wall_s": round(wall, 1), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "environment": os.path.basename(os.path.dirname(os.path.dirname(pythons[release])))}
        if printed is not None:
            sample.update(printed)
        if message:
            sample["message"] = message
        with interrupts.deferred():  # a run is recorded whole
            store.append_sample(out, framework, sample)
        growth = (printed or {}).get("figures", {}).get(detect.GROWTH)  # a growth change's script only
        shown = (f"{printed['figure']} {printed['figures'][printed['figure']] / MIB:.2f} MiB"
                 + (f", growth {detect.fmt(detect.GROWTH, growth)} a step" if growth is not None else "")
                 if printed else message)
        say(f"  {release} run {index}/{runs}: {status}, {shown} ({wall:.0f} s)", flush=True)
    return held(store.read_samples(out, framework), group, sha), None
