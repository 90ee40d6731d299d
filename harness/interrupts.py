"""Stopping a command cleanly when it is told to: SIGTERM, SIGHUP, SIGINT.

Workers run in sessions of their own (sweep/worker_process.py: so a terminal's Ctrl-C does not hit
a worker half-way through a measurement, and its compiler subprocesses die with it
when its group is killed). The price: a signal sent to the sweep (`timeout`, a CI job
cancelled, asv's timeout, a scheduler, a closed terminal) never reaches them. So every
live worker's process group is registered here (`started` / `ended`), and while
`handling()` is in force the first of those signals:

1. SIGKILLs every registered group at once, from the handler itself (several workers
   may run at once, each waited on by its own thread);
2. raises `Interrupted` in the main thread; the command's ``finally`` blocks remove its
   temporary directory, and it exits with `Interrupted.exit_code`, 128 + the signal's
   number (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM), as a shell reports a process killed
   by that signal;
3. before it exits (`handling()`'s end) waits, `GONE_WAIT_S` at most, until no live
   process is left in a group it killed. SIGKILL is delivered at once, but a process's
   exit is the kernel's and takes a moment (its memory torn down), longer on a busy
   machine: without the wait, whoever started the command (a scheduler starting the
   next job, a test) could see a killed worker still holding its memory after the
   command had exited.

Later signals (a second Ctrl-C, the TERM that `timeout` repeats) only kill groups
again, so the clean-up they would interrupt still runs. Inside `deferred()` (starting a
worker and registering it, appending a record) the exception waits until the block
ends, so a finished cell's record is written whole and no worker starts unregistered.
A worker thread that sees its worker end after a signal raises `Interrupted` too
(`raise_if_stopping`), so no killed pass is taken for a failed cell.

SIGKILL of the command itself cannot be handled: its workers die with it (the kernel
sends them SIGKILL when their parent dies: worker.py, end_with_parent), but its
temporary directory stays (docs/faults.md).

`harness run`, `check`, `scale` and `bisect` call `handling()`, catch `Interrupted`, and
start their workers through sweep/worker_process.py (an executor's WorkerProcess, or run_worker),
which registers them.
"""

import contextlib
import os
import signal
import threading
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: how long a stopped command waits for the processes of the groups it killed to be
#: gone (3. above): a killed worker's teardown takes milliseconds to a few seconds
GONE_WAIT_S = 10.0


class Interrupted(KeyboardInterrupt):
    """The command was told to stop by a signal; its workers are already killed.

    A KeyboardInterrupt, so code that already lets Ctrl-C through lets this through."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def signal_name(self):
        return signal.Signals(self.signum).name

    @property
    def exit_code(self):
        return 128 + self.signum


_groups = set()  # process-group ids of live workers (= their leaders' PIDs)
_killed = set()  # the groups kill_all signalled: waited for before the command exits
# signum: the first signal; raised: Interrupted was raised in the main thread;
# deferring: the main thread's depth of deferred() blocks
_stop = {"signum": None, "raised": False, "deferring": 0, "installed": False}


def started(pgid):
    """Register a worker's process group. Call only with the worker still unreaped
    (running or a zombie), and `ended` before reaping it: then its id cannot have been
    reused by an unrelated process while the handler may signal it."""
    _groups.add(pgid)
    if _stop["signum"] is not None:
        kill_all()  # the signal came while this worker was starting (in another thread)


def ended(pgid):
    _groups.discard(pgid)


def kill_all():
    """SIGKILL every live worker's process group (safe from a signal handler)."""
    for pgid in list(_groups):  # list(): one C call, atomic under the GIL
        _killed.add(pgid)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stopping():
    """The signal number that told us to stop, or None."""
    return _stop["signum"]


def raise_if_stopping():
    """Raise Interrupted if a signal told us to stop (called after a worker ended: a
    worker killed by the handler is not a failed cell). In the main thread inside
    `deferred()` it waits for the block's end."""
    main = _on_main_thread()
    if _stop["signum"] is None or (main and _stop["deferring"]):
        return
    if main:
        _stop["raised"] = True
    raise Interrupted(_stop["signum"])


def _on_main_thread():
    return threading.current_thread() is threading.main_thread()


def _handler(signum, frame):
    # Runs in the main thread. The stop is set before the groups are killed and
    # `started` adds before it looks: a worker starting in another thread meanwhile is
    # killed by one of the two.
    first = _stop["signum"] is None
    if first:
        _stop["signum"] = signum
    kill_all()
    if first and not _stop["deferring"]:
        _stop["raised"] = True
        raise Interrupted(signum)


@contextlib.contextmanager
def handling():
    """Handle SIGTERM, SIGHUP and SIGINT as described above for the block's duration;
    the previous handlers come back after it. A signal the process was told to ignore
    stays ignored (`nohup` ignores SIGHUP; a shell's background job, SIGINT). Outside
    the main thread (where Python cannot set handlers) it does nothing."""
    if not _on_main_thread() or _stop["installed"]:
        yield
        return
    _stop.update(signum=None, raised=False, deferring=0, installed=True)
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, _handler)
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if _stop["signum"] is not None:
            wait_until_gone(_killed, GONE_WAIT_S)
        _killed.clear()
        _stop.update(signum=None, raised=False, deferring=0, installed=False)


def wait_until_gone(pgids, timeout_s):
    """Wait, `timeout_s` at most, until no process of the groups `pgids` is alive (a
    zombie counts as gone: its memory is freed, only its exit status waits for its
    parent). True if they are gone. Reads /proc; where there is none it cannot tell,
    and returns False at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = live_members(pgids)
        if not alive:
            return alive is not None
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def live_members(pgids):
    """PIDs of the processes in the groups `pgids` that are not zombies (None: no /proc)."""
    if not pgids:
        return []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    alive = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                # after the command name (which may hold spaces and parentheses):
                # state, ppid, pgrp
                state, _ppid, pgrp = handle.read().rsplit(b")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue  # gone meanwhile
        if int(pgrp) in pgids and state not in (b"Z", b"X"):
            alive.append(int(entry))
    return alive


@contextlib.contextmanager
def deferred():
    """A block of the main thread an interruption must not cut in two: a signal during
    it still kills every registered worker at once, but Interrupted is raised when the
    block ends (unless the block raised something else). Other threads are never
    interrupted asynchronously: there it does nothing."""
    if not _on_main_thread():
        yield
        return
    _stop["deferring"] += 1
    try:
        yield
    finally:
        _stop["deferring"] -= 1
    if not _stop["raised"]:
        raise_if_stopping()
