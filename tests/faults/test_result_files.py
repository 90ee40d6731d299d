"""A result file after an append: no `FILE.lock` left beside it, and the mode any new
file gets (0666 less the umask: 0644 usually), not the owner-only 0600 of the
temporary file it was written as; appends from several processes at once still lose
nothing while each removes the lock file (harness/results.py)."""

import multiprocessing
import os
import stat

import pytest

from harness import results

CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
        "mode": "compiled", "device": "cpu"}


def record(seed):
    return results.new_record(CELL, "unavailable", "no compiled mode", {"seed": seed})


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Set the umask for the test (os.umask returns the one it replaces)."""
    before = os.umask(0o022)
    yield os.umask
    os.umask(before)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_new_result_file_and_page_take_the_umask_s_mode(tmp_path, umask, mask, expected):
    umask(mask)
    out, page = tmp_path / "r.jsonl", tmp_path / "index.html"
    results.append_record(out, record(0))
    results.write_text_atomic(page, "<!DOCTYPE html>")
    assert (mode(out), mode(page)) == (expected, expected)


def test_an_append_keeps_the_file_s_mode_and_leaves_no_lock_file(tmp_path, umask):
    out = tmp_path / "r.jsonl"
    results.append_record(out, record(0))
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl"]  # no r.jsonl.lock after a normal finish
    os.chmod(out, 0o664)  # the user's choice stays
    results.append_record(out, record(1))
    assert mode(out) == 0o664 and sorted(os.listdir(tmp_path)) == ["r.jsonl"]
    assert [r["provenance"]["seed"] for r in results.read_records(out)] == [0, 1]


def test_a_lock_file_left_by_a_killed_writer_is_used_and_removed(tmp_path, umask):
    out = tmp_path / "r.jsonl"
    (tmp_path / "r.jsonl.lock").write_text("")  # a sweep killed in the middle of an append
    results.append_record(out, record(0))
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl"]


def _append_many(out, seed, count):
    for number in range(count):
        results.append_record(out, record(seed * 1000 + number))


def test_writers_racing_for_a_lock_that_each_removes_lose_no_record(tmp_path, umask):
    # A writer waiting on the lock of a file the holder then removes must not go on
    # beside a writer that made the next lock file: each would read the same old file
    # and one append would be lost.
    out, writers, count = str(tmp_path / "r.jsonl"), 4, 40
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=_append_many, args=(out, seed, count)) for seed in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    seeds = [r["provenance"]["seed"] for r in results.read_records(out)]
    assert sorted(seeds) == sorted(s * 1000 + n for s in range(writers) for n in range(count))
    assert sorted(os.listdir(tmp_path)) == ["r.jsonl"]
