"""Run an installer (pip, git, a build hook) so that a stop signal stops it too.

The command runs in a session of its own, registered with harness/interrupts.py
like a worker: SIGTERM, SIGHUP or Ctrl-C to the command kills the installer's whole
process group (pip's build subprocesses included) and the caller's ``finally`` blocks
remove its half-built environment.
"""

import os
import signal
import subprocess
import time

from harness import interrupts

TAIL_LINES = 15
LINE_CHARS = 400
POLL_S = 0.05


def run(command, log_path, timeout_s=None, cwd=None, env=None):
    """(return code, the last lines of its output); output goes to `log_path`.
    A command that cannot start is return code 127 with the reason as its output."""
    proc = None
    try:
        with interrupts.deferred(), open(log_path, "ab") as log:
            try:
                proc = subprocess.Popen(
                    command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )
            except OSError as err:
                log.write(f"cannot start {command[0]}: {err}\n".encode())
                return 127, tail(log_path)
            interrupts.started(proc.pid)
        if not _exited(proc.pid, timeout_s):
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"\n(killed after {timeout_s:g} s)\n")
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            interrupts.ended(proc.pid)
            proc.wait()
    interrupts.raise_if_stopping()
    return proc.returncode, tail(log_path)


def _exited(pid, timeout_s):
    """True once `pid` has exited, left unreaped (so its group id cannot be reused
    before the group is killed), False at the timeout."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def tail(path, lines=TAIL_LINES):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    return last_lines(text, lines)


def last_lines(text, lines=TAIL_LINES, most=LINE_CHARS):
    """The last `lines` non-blank lines of `text`, each cut to its two ends past `most`
    characters (None: kept whole)."""
    kept = [line if most is None else _shortened(line, most) for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _shortened(line, most=LINE_CHARS):
    """A line kept whole up to `most` characters, else its two ends: pip's "(from
    versions: 0.0.1, ..., 0.10.2)" line runs to 2,000 characters and pushed the
    ERROR line after it out of a reason cut to its last characters."""
    if len(line) <= most:
        return line
    half = (most - 5) // 2
    return f"{line[:half]} ... {line[-half:]}"
