"""Running `python -m harness run` as a process a test can fault: its own scratch
directory (TMPDIR), so the test sees exactly the temporary files and worker processes
this sweep made, even with other sweeps running on the machine."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
RUN = [sys.executable, "-m", "harness", "run"]
#: cells the parent rules out without a worker (the reference engine has no compiled
#: mode): a record each, written at once; add --workload
INSTANT = ["--framework", "reference", "--size", "tiny", "--mode", "compiled"]
#: the same cell, then a tiny one that runs (memory and time workers)
ONE_OF_EACH = ["--workload", "chained_dot", "--framework", "reference", "--size", "tiny", "--mode", "compiled,eager"]


def signals_as_from_a_terminal(then=None):
    """A preexec_fn: the child starts with SIGINT, SIGHUP and SIGTERM at their default
    dispositions, as a command typed at a terminal does. A suite started as
    `nohup make test &` hands its children SIGHUP and SIGINT ignored, and a sweep rightly
    keeps an ignored signal ignored, so the signal tests set what they rely on."""

    def reset():
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        if then is not None:
            then()

    return reset


class Sweep:
    def __init__(self, tmp_path, *args, env=None, name="r.jsonl", out_dir=None, wrap=(), preexec_fn=None):
        """Start `python -m harness run ARGS --out (out_dir or tmp_path)/name`, under
        the `wrap` command line if given (it ends with the command as its arguments)."""
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir(exist_ok=True)
        self.out = (out_dir or tmp_path) / name
        environ = {**os.environ, "TMPDIR": str(self.scratch), **(env or {})}
        self.proc = subprocess.Popen(
            [*wrap, *RUN, *args, "--out", str(self.out)], cwd=PROJECT, env=environ,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=signals_as_from_a_terminal(preexec_fn),
        )

    def finish(self, timeout=120):
        stdout, stderr = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, stdout, stderr

    def workers(self, kind=""):
        """PIDs of live processes started for this sweep (their command lines name its
        scratch directory: workers, and anything they started with its job path);
        `kind`: only those whose command line also holds it, e.g. "-memory-"."""
        return processes_mentioning(str(self.scratch), kind)

    def leftovers(self):
        """Files left in the scratch directory and temporary files beside --out."""
        left = [str(p) for p in self.scratch.rglob("*")]
        return left + [str(p) for p in self.out.parent.glob(f".{self.out.name}.*.tmp")]


class Check:
    """`python -m harness check ARGS` with its own scratch directory (TMPDIR), as Sweep."""

    def __init__(self, tmp_path, *args, env=None):
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir(exist_ok=True)
        environ = {**os.environ, "TMPDIR": str(self.scratch), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness", "check", *args], cwd=PROJECT, env=environ,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=signals_as_from_a_terminal(),
        )

    finish = Sweep.finish

    def workers(self):
        """PIDs of live processes started for this check (workers and zygotes)."""
        return processes_mentioning(str(self.scratch))

    def marked(self, mark):
        """True once a worker of this check has left `mark` in its marks file."""
        return any(mark in p.read_text() for p in self.scratch.rglob("*.marks"))

    def leftovers(self):
        return [str(p) for p in self.scratch.rglob("*")]


def processes_mentioning(text, also=""):
    """Live processes whose command line or standard output names `text` (and `also`):
    a spawned worker's command line holds its job's path; a worker forked by a zygote
    (harness/sweep/zygote.py) has the zygote's command line, and its own log as stdout."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace")
            try:
                cmdline += " " + os.readlink(f"/proc/{entry}/fd/1")
            except OSError:
                pass
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and also in cmdline and state != b"Z":
            found.append(int(entry))
    return found


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def lines(path):
    """The file's lines, each parsed (a test fails on any line that is not JSON)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]
