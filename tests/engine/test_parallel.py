"""conv2d's slab loops shared between threads (harness/engine/parallel.py)."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from harness.engine import parallel, prims


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(prims, "MIN_SLAB_BYTES", 1)  # several slabs even at test sizes
    parallel.set_count(2)
    yield
    parallel.set_count(1)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_thread_count_that_is_not_a_positive_int_is_refused(bad):
    with pytest.raises(ValueError, match="int >= 1"):
        parallel.set_count(bad)
    assert parallel.count() == 1


def test_every_item_is_walked_once_and_each_thread_returns_its_own(two_threads):
    # The worker blocks on its first item until the caller has taken one too: both
    # threads are seen to walk items, and between them every item exactly once.
    both_started = threading.Barrier(2, timeout=10)

    def walk(items):
        mine = []
        for item in items:
            if not mine:
                both_started.wait()
            mine.append(item)
        return threading.get_ident(), mine

    results = parallel.run_shared(walk, range(20))
    assert len(results) == 2 and results[0][0] == threading.get_ident() != results[1][0]
    assert sorted(results[0][1] + results[1][1]) == list(range(20))
    assert results[0][1] and results[1][1]


def test_a_worker_that_never_starts_is_not_waited_for(two_threads):
    # A busy machine: the worker is not scheduled before the caller has walked every
    # item. The caller takes its job back instead of waiting for it.
    parallel.run_shared(lambda items: list(items), range(4))  # the worker exists now
    worker = parallel._workers[0]
    busy, release = threading.Event(), threading.Event()
    worker.offer(parallel._Job(lambda: (busy.set(), release.wait(10))))  # keeps the worker busy
    try:
        assert busy.wait(10)
        started = time.perf_counter()
        results = parallel.run_shared(lambda items: list(items), range(6))
        assert results == [list(range(6))]  # the caller's walk alone: the worker's job taken back
        assert time.perf_counter() - started < 5
    finally:
        release.set()


def test_a_workers_exception_is_raised_in_the_caller_after_all_threads_stop(two_threads):
    walked = []

    def walk(items):
        for item in items:
            walked.append(item)
            if threading.current_thread() is not threading.main_thread():
                raise RuntimeError("from the worker")
            time.sleep(0.001)  # leaves the worker time to take an item
        return None

    with pytest.raises(RuntimeError, match="from the worker"):
        for _ in range(20):  # until the worker has taken an item once
            walked.clear()
            parallel.run_shared(walk, range(50))
    assert sorted(walked) == sorted(set(walked))  # no item walked twice
    assert parallel.run_shared(lambda items: sum(items), range(10)) is not None  # the worker lives on


def test_slabs_of_a_shared_walk_hold_together_what_one_serial_slab_did(monkeypatch):
    # The slabs in flight at once (one per thread) hold what one serial slab did.
    monkeypatch.setattr(prims, "MIN_SLAB_BYTES", 1)
    widest = lambda slabs: max(s.stop - s.start for s in slabs)
    serial, shared = prims._row_slabs(64, 4096), prims._row_slabs(64, 4096, threads=2)
    assert [(s.start, s.stop) for s in serial][-1][1] == 64 == shared[-1].stop
    assert len(shared) == 2 * len(serial) and 2 * widest(shared) <= widest(serial)


@pytest.mark.parametrize("stride, padding", [(1, 1), (2, 1), (1, 0)])
def test_shared_slabs_give_the_serial_conv_and_gradients(two_threads, stride, padding):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 17, 15)), rng.standard_normal((4, 3, 3, 2))
    out = prims.conv2d.forward(x, w, stride=stride, padding=padding)
    g = rng.standard_normal(out.shape)
    vx, vw = prims._conv2d_vjp_x(out, x, w, stride, padding), prims._conv2d_vjp_w(out, x, w, stride, padding)
    shared = out, vx(g), vw(g)
    parallel.set_count(1)
    serial = prims.conv2d.forward(x, w, stride=stride, padding=padding), vx(g), vw(g)
    np.testing.assert_array_equal(shared[0], serial[0])  # each output row made by one thread, as serially
    np.testing.assert_array_equal(shared[1], serial[1])
    np.testing.assert_allclose(shared[2], serial[2], rtol=1e-12)  # dw: the threads' parts summed


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_workers(two_threads):
    x, w = np.ones((1, 2, 12, 12)), np.ones((3, 2, 3, 3))
    expected = prims.conv2d.forward(x, w, padding=1)  # the parent has a worker thread now
    pid = os.fork()
    if pid == 0:  # the worker did not survive the fork: a new one must start
        signal.alarm(20)  # (a child waiting on the dead thread would hang: killed instead)
        os._exit(0 if np.array_equal(prims.conv2d.forward(x, w, padding=1), expected) else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_no_thread_keeps_the_callers_arrays_after_the_call(two_threads):
    # A conv's closure holds its cotangent and output: a worker that kept its last job
    # would keep them alive past the VJP (unet's step peak rose 0.5 MB that way).
    import gc
    import weakref

    class Big(np.ndarray):  # (a plain ndarray has no weak references)
        pass

    both_started = threading.Barrier(2, timeout=10)
    held = np.zeros(1000).view(Big)
    ref = weakref.ref(held)

    def walk(items, held=held):
        for i, item in enumerate(items):
            if i == 0:
                both_started.wait()
        return held.size

    assert parallel.run_shared(walk, range(8)) == [1000, 1000]  # both threads ran it
    del walk, held
    gc.collect()
    assert ref() is None
