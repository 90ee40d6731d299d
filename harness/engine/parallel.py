"""Worker threads for conv2d's slab loops: the output rows shared between them.

conv2d's products are small (a few channels by a slab of pixels), under the size at
which OpenBLAS uses more than one thread, so a serial conv keeps one core busy where
torch's direct convolution keeps all it is given. NumPy releases the GIL inside BLAS
calls and ufunc loops, so `count()` threads each walking its own share of a conv's
rows keep that many cores busy. The count is the harness's thread count
(GRADMEM_THREADS: `ReferenceAdapter.load` sets it, as every adapter sets its
framework's); 1 by default, serial. Only NumPy arrays are shared out (CuPy queues its
kernels on one stream anyway).

Each share walks slabs 1/count the serial size (`prims._row_slabs`), so the slabs in
flight together hold the bytes one serial slab did: the step peak does not move.
"""

import concurrent.futures
import os

_count = 1
_pool = None


def _forget_pool():
    # A forked child (the sweep's workers fork from a process that may have run steps)
    # has the pool object but not its threads: it starts its own on first use.
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def set_count(count):
    """Use `count` threads (1: serial) for the slab loops from now on."""
    global _count, _pool
    if not (isinstance(count, int) and count >= 1):
        raise ValueError(f"thread count must be an int >= 1, got {count!r}")
    if count != _count and _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None
    _count = count


def count():
    return _count


def run_shares(work, shares):
    """[work(share) for share in shares], the first share in this thread and each other
    on a worker, all at once; a worker's exception is raised here."""
    global _pool
    if len(shares) == 1:
        return [work(shares[0])]
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=_count - 1, thread_name_prefix="gradmem-slabs")
    futures = [_pool.submit(work, share) for share in shares[1:]]
    try:
        first = work(shares[0])
    finally:
        concurrent.futures.wait(futures)  # no share outlives the call, even where ours failed
    return [first] + [future.result() for future in futures]
