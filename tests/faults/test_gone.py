"""interrupts.wait_until_gone: what a stopped command waits for before it exits (the
groups it SIGKILLed, no live process left in them), on real processes."""

import os
import signal
import subprocess
import time

from harness import interrupts


def _session(argv):
    """A process in a session (and so a process group) of its own, as a worker is."""
    return subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL)


def test_a_live_group_is_waited_for_and_a_killed_one_is_gone_while_still_a_zombie():
    proc = _session(["sleep", "60"])
    try:
        assert interrupts.live_members({proc.pid}) == [proc.pid]
        started = time.monotonic()
        assert interrupts.wait_until_gone({proc.pid}, 0.3) is False  # alive: it waits out its bound
        assert time.monotonic() - started >= 0.3
        os.killpg(proc.pid, signal.SIGKILL)
        # Not reaped: a zombie. Its memory is freed, only its exit status waits, so it
        # counts as gone (the command's wait must not hang on workers its threads reap).
        assert interrupts.wait_until_gone({proc.pid}, 5) is True
        with open(f"/proc/{proc.pid}/stat", "rb") as handle:
            assert handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    finally:
        proc.kill()
        proc.wait()


def test_a_group_is_gone_only_when_every_member_is():
    # The leader killed alone leaves its child (same group) alive: still waited for.
    proc = _session(["sh", "-c", "sleep 60 & echo $!; wait"])
    try:
        deadline = time.monotonic() + 10
        while len(interrupts.live_members({proc.pid})) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        members = interrupts.live_members({proc.pid})
        assert len(members) == 2 and proc.pid in members
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        (child,) = interrupts.live_members({proc.pid})
        assert child != proc.pid
        assert interrupts.wait_until_gone({proc.pid}, 0.2) is False
        os.killpg(proc.pid, signal.SIGKILL)
        assert interrupts.wait_until_gone({proc.pid}, 5) is True
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_without_proc_it_cannot_tell_and_does_not_wait(monkeypatch):
    def no_proc(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(interrupts.os, "listdir", no_proc)
    started = time.monotonic()
    assert interrupts.live_members({1}) is None
    assert interrupts.wait_until_gone({1}, 5) is False
    assert time.monotonic() - started < 1


def test_no_groups_no_wait():
    assert interrupts.live_members(set()) == []
    assert interrupts.wait_until_gone(set(), 5) is True
