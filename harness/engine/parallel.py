"""Worker threads for conv2d's slab loops: the slabs shared out as they come.

conv2d's products are small (a few channels by a slab of pixels), under the size at
which OpenBLAS uses more than one thread, so a serial conv keeps one core busy where
torch's direct convolution keeps all it is given. NumPy releases the GIL inside BLAS
calls and ufunc loops, so `count()` threads walking a conv's slabs keep that many
cores busy. The count is the harness's thread count (GRADMEM_THREADS:
`ReferenceAdapter.load` sets it, as every adapter sets its framework's); 1 by
default, serial. Only NumPy arrays are shared out (CuPy queues its kernels on one
stream anyway).

`run_shared` hands the workers the same iterator of slabs the calling thread walks:
each thread takes the next slab when it is done with one. A worker that the OS has not
scheduled yet (a busy machine) takes none: the caller walks them all and takes the
worker's job back, so a conv never waits for a core that is not free. The workers
are persistent and wake on a semaphore (a few microseconds); a conv takes ~100-500 us
at the sizes where this matters.
"""

import os
import threading

_count = 1
_workers = []


class _Job:
    __slots__ = ("work", "done", "result", "error")

    def __init__(self, work):
        self.work, self.result, self.error = work, None, None
        self.done = threading.Lock()
        self.done.acquire()  # released by the worker that ran it


class _Worker:
    """One thread that runs the jobs handed to it, one at a time."""

    def __init__(self):
        self._wake = threading.Semaphore(0)  # one release per job offered (or stop)
        self._offered = []  # at most one job; whoever pops it (worker or caller) owns it
        self._stopping = False
        self.thread = threading.Thread(target=self._loop, name="gradmem-slabs", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self._wake.acquire()
            if self._stopping:
                return
            try:
                job = self._offered.pop()
            except IndexError:  # the caller took it back: it had done every slab
                continue
            work, job.work = job.work, None
            try:
                job.result = work()
            except BaseException as error:  # raised again in the caller's thread
                job.error = error
            # Nothing of the job may stay referenced from this thread while it waits:
            # its closure holds the caller's arrays (a cotangent, the conv's output).
            work = None
            job.done.release()
            job = None

    def offer(self, job):
        self._offered.append(job)
        self._wake.release()

    def take_back(self):
        """True if the offered job had not started (the caller now owns it)."""
        try:
            self._offered.pop()
            return True
        except IndexError:
            return False

    def stop(self):
        self._stopping = True
        self._wake.release()
        self.thread.join()


def _forget_workers():
    # A forked child (the sweep's workers fork from a process that may have run steps)
    # has the worker objects but not their threads: it starts its own on first use.
    global _workers
    _workers = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def set_count(count):
    """Use `count` threads (1: serial) for the slab loops from now on."""
    global _count, _workers
    if not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
        raise ValueError(f"thread count must be an int >= 1, got {count!r}")
    for worker in _workers[count - 1 :]:
        worker.stop()
    _workers = _workers[: count - 1]
    _count = count


def count():
    return _count


def run_shared(work, items):
    """The results of ``work(it)`` in every thread that took part, the calling thread's
    first: `it` is one iterator over `items` shared by all (each `next` hands out an
    item once), so ``work`` walks whichever items its thread gets to first and returns
    what its thread made of them. Serial with one thread or one item. A worker's
    exception is raised here, after every thread has stopped (no work outlives the
    call)."""
    items = list(items)
    shared = iter(items)
    if _count == 1 or len(items) < 2:
        return [work(shared)]
    helpers = _count - 1 if len(items) > _count - 1 else len(items) - 1
    while len(_workers) < helpers:
        _workers.append(_Worker())
    jobs = []
    for worker in _workers[:helpers]:
        job = _Job(lambda: work(shared))
        worker.offer(job)
        jobs.append((worker, job))
    error, results = None, []
    try:
        results.append(work(shared))
    except BaseException as raised:
        error = raised
        for _ in shared:  # leave nothing for the workers to start on
            pass
    for worker, job in jobs:
        if worker.take_back():
            continue  # never started: the items all went to the threads that ran
        job.done.acquire()
        if job.error is not None and error is None:
            error = job.error
        results.append(job.result)
    if error is not None:
        raise error
    return results
