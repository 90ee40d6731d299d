"""The ledger: live bytes of every buffer the engine allocated, a peak and a timeline.

The engine reports each array it creates (forward outputs, cotangents, gradient
accumulators) with `track`. The ledger keys a buffer by its base address, so a view
(reshape, transpose, slice) of a tracked buffer adds nothing, and it watches the
buffer's owning array through a weak reference: the bytes are released when the
array is really freed, whoever held it last (the user's code, a saved residual, a
cotangent). So `live_bytes` is what the process actually holds because of the engine
and `peak_bytes` its maximum, which `tracemalloc` can cross-check (NumPy reports its
buffers to it). Arrays handed in by the caller are not the engine's and are not
counted, and neither are transients that live only inside one NumPy call.
"""

import collections
import weakref

from harness.engine import xp


class Ledger:
    def __init__(self):
        self.live_bytes = 0
        self.peak_bytes = 0
        #: [(event_index, live_bytes, tag)]: one row per allocation, free or mark
        self.timeline = []
        #: bytes ever allocated, by dtype name (float32 runs must show only float32)
        self.allocated = collections.Counter()
        #: how many times each primitive's VJP ran
        self.vjp_calls = collections.Counter()
        self._live = {}  # address -> (nbytes, tag, weakref to the owning array)

    def track(self, array, tag):
        """Count `array`'s buffer as live from now until its owner is freed (once per
        buffer: tracking a view of a tracked buffer does nothing)."""
        base = xp.owner(array)
        if base.nbytes == 0:
            return
        address = xp.buffer_address(base)
        if address in self._live:
            return
        try:
            ref = weakref.ref(base, lambda _, address=address: self._release(address))
        except TypeError:  # an array type without weak references: count it as live
            ref = None
        self._live[address] = (base.nbytes, tag, ref)
        self.allocated[str(base.dtype)] += base.nbytes
        self._record(base.nbytes, tag)

    def mark(self, tag):
        """A timeline row that changes nothing: a phase boundary for plots."""
        self._record(0, tag)

    def reset_peak(self):
        """Start a new phase: the peak restarts from what is live now."""
        self.peak_bytes = self.live_bytes

    def live_by_tag(self):
        """{tag: live bytes} of the buffers live now, by the tag they were tracked with."""
        by_tag = collections.Counter()
        for nbytes, tag, _ in self._live.values():
            by_tag[tag] += nbytes
        return dict(by_tag)

    def _release(self, address):
        nbytes, tag, _ = self._live.pop(address)
        self._record(-nbytes, "free " + tag)

    def _record(self, delta, tag):
        self.live_bytes += delta
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self.timeline.append((len(self.timeline), self.live_bytes, tag))

    def __repr__(self):
        return f"Ledger(live_bytes={self.live_bytes}, peak_bytes={self.peak_bytes}, events={len(self.timeline)})"
