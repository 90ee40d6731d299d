"""conv2d's slab loops shared between threads (harness/engine/parallel.py)."""

import os
import signal

import numpy as np
import pytest

from harness.engine import parallel, prims


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(prims, "MIN_SLAB_BYTES", 1)  # several slabs even at test sizes
    parallel.set_count(2)
    yield
    parallel.set_count(1)


def test_a_thread_count_below_one_is_refused():
    with pytest.raises(ValueError, match="int >= 1"):
        parallel.set_count(0)


def test_each_thread_walks_its_own_rows_in_smaller_slabs(monkeypatch):
    # The slabs in flight at once (one per thread) hold what one serial slab did.
    monkeypatch.setattr(prims, "MIN_SLAB_BYTES", 1)
    serial = prims._row_shares(64, 4096, np)
    monkeypatch.setattr(parallel, "_count", 2)
    shares = prims._row_shares(64, 4096, np)
    assert len(serial) == 1 and len(shares) == 2
    assert [r for share in shares for r in share][0].start == 0 and shares[1][-1].stop == 64
    widest = lambda slabs: max(s.stop - s.start for s in slabs)
    assert 2 * widest(shares[0]) <= widest(serial[0]) + 1


def test_shared_rows_give_the_serial_conv_and_gradients(two_threads):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 17, 15)), rng.standard_normal((4, 3, 3, 2))
    out = prims.conv2d.forward(x, w, stride=2, padding=1)
    g = rng.standard_normal(out.shape)
    vx, vw = prims._conv2d_vjp_x(out, x, w, 2, 1), prims._conv2d_vjp_w(out, x, w, 2, 1)
    shared = out, vx(g), vw(g)
    parallel.set_count(1)
    serial = prims.conv2d.forward(x, w, stride=2, padding=1), vx(g), vw(g)
    np.testing.assert_array_equal(shared[0], serial[0])  # each output row made by one thread, as serially
    np.testing.assert_array_equal(shared[1], serial[1])
    np.testing.assert_allclose(shared[2], serial[2], rtol=1e-12)  # dw: the threads' parts summed


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_workers(two_threads):
    x, w = np.ones((1, 2, 12, 12)), np.ones((3, 2, 3, 3))
    expected = prims.conv2d.forward(x, w, padding=1)  # the parent's pool now has a thread
    pid = os.fork()
    if pid == 0:  # the pool's thread did not survive the fork: a new one must start
        signal.alarm(20)  # (a child waiting on the dead thread would hang: killed instead)
        os._exit(0 if np.array_equal(prims.conv2d.forward(x, w, padding=1), expected) else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
