"""The ledger: live bytes of every buffer the engine allocated, a peak and a timeline.

The engine reports each array it creates (forward outputs, cotangents, gradient
accumulators) with `track`. The ledger keys a buffer by the array that owns it (`key`:
its identity, which is unique while the ledger's weak reference keeps it watched, and
cheaper per op than asking the array for its address), so a view (reshape, transpose,
slice) of a tracked buffer adds nothing, and it watches the buffer's owning array
through a weak reference: the bytes are released when the
array is really freed, whoever held it last (the user's code, a saved residual, a
cotangent). So `live_bytes` is what the process actually holds because of the engine
and `peak_bytes` its maximum, which `tracemalloc` can cross-check (NumPy reports its
buffers to it). Arrays handed in by the caller are not the engine's and are not
counted, and neither are transients that live only inside one NumPy call.

Each buffer a VJP saves also carries why (`note_saved`, called by `saving.save` with
the reason the maker gives in the line that saves it): `kept_for()` lists the live
buffers with their reasons, which at the end of a forward pass is the account of
every saved byte.
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
        self._live = {}  # key -> (nbytes, tag, weakref to the owning array)
        self._why = {}  # key -> [why a VJP saves it], for live saved buffers
        #: {tag: live bytes} at the highest point since `watch_peak` (None: not watched)
        self.peak_by_tag = None
        #: {tag: bytes allocated} since `watch_peak` (None: not watched)
        self.allocated_by_tag = None
        self._watched = None  # {tag: live bytes} kept current while a peak is watched

    def track(self, array, tag):
        """Count `array`'s buffer as live from now until its owner is freed (once per
        buffer: tracking a view of a tracked buffer does nothing)."""
        base = xp.owner(array)
        nbytes = base.nbytes
        address = id(base)
        if nbytes == 0 or address in self._live:
            return
        try:
            ref = weakref.ref(base, lambda _, address=address: self._release(address))
        except TypeError:  # an array type without weak references: count it as live
            ref = None
        self._live[address] = (nbytes, tag, ref)
        self.allocated[_dtype_name(base.dtype)] += nbytes
        if self._watched is not None:
            self._watched[tag] += nbytes
            self.allocated_by_tag[tag] = self.allocated_by_tag.get(tag, 0) + nbytes
        self._record(nbytes, tag)

    def retag(self, array, tag):
        """`array`'s buffer now holds what `tag` made (an output written over a
        temporary, tape.donated): count it under that tag from now on."""
        address = key(array)
        if address in self._live:
            nbytes, old, ref = self._live[address]
            self._live[address] = (nbytes, tag, ref)
            if self._watched is not None:
                self._watched[old] -= nbytes
                self._watched[tag] += nbytes

    def note_saved(self, array, why):
        """A VJP keeps `array`'s buffer, because `why` (a tracked buffer only: the
        caller's arrays are not the engine's)."""
        address = key(array)
        if address in self._live:
            reasons = self._why.setdefault(address, [])
            if why not in reasons:
                reasons.append(why)

    def reasons(self, address):
        """Why VJPs keep the live buffer `address` (its `key`; [] if none saved it)."""
        return list(self._why.get(address, ()))

    def kept_for(self):
        """[(tag, nbytes, [why])] of the live buffers some VJP saves, biggest first."""
        rows = [(tag, nbytes, self._why[address]) for address, (nbytes, tag, _) in self._live.items() if address in self._why]
        return sorted(rows, key=lambda row: -row[1])

    def mark(self, tag):
        """A timeline row that changes nothing: a phase boundary for plots."""
        self._record(0, tag)

    def reset_peak(self):
        """Start a new phase: the peak restarts from what is live now."""
        self.peak_bytes = self.live_bytes

    def watch_peak(self):
        """From now on, keep what is live at the highest point, by tag (`peak_by_tag`),
        and what is allocated, by tag (`allocated_by_tag`): the peak restarts from what
        is live now. Off by default: it copies the tag counts at each new high, which
        the measured steps should not pay for."""
        self._watched = collections.Counter(self.live_by_tag())
        self.allocated_by_tag = {}
        self.reset_peak()
        self.peak_by_tag = dict(self._watched)

    def live_buffers(self):
        """[(key, nbytes, tag)] of the buffers live now (`key`: the owning array's)."""
        return [(address, nbytes, tag) for address, (nbytes, tag, _) in self._live.items()]

    def live_by_tag(self):
        """{tag: live bytes} of the buffers live now, by the tag they were tracked with."""
        by_tag = collections.Counter()
        for nbytes, tag, _ in self._live.values():
            by_tag[tag] += nbytes
        return dict(by_tag)

    def _release(self, address):
        nbytes, tag, _ = self._live.pop(address)
        self._why.pop(address, None)
        if self._watched is not None:
            self._watched[tag] -= nbytes
        self._record(-nbytes, "free " + tag)

    def _record(self, delta, tag):
        self.live_bytes += delta
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            if self._watched is not None:
                self.peak_by_tag = {k: v for k, v in self._watched.items() if v}
        self.timeline.append((len(self.timeline), self.live_bytes, tag))

    def __repr__(self):
        return f"Ledger(live_bytes={self.live_bytes}, peak_bytes={self.peak_bytes}, events={len(self.timeline)})"


def key(array):
    """The ledger's key for `array`'s buffer: its owning array's identity."""
    return id(xp.owner(array))


_DTYPE_NAMES = {}


def _dtype_name(dtype):
    # str(dtype) costs microseconds on every tracked array; the names are few
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name
