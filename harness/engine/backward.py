"""The reverse pass: schedule, prune, run each VJP once, accumulate in place.

What it guarantees, each with the thread or commit it comes from (docs/design.md, "The
reference engine"):

- only nodes between the loss and a wanted leaf run a VJP (pruning, as candle does);
  inside a node, only parents that need a gradient get one, the smallest first (a
  conv's weight gradient is made before its input's, which then exists for one VJP
  less: unet small's tracemalloc peak -1 %);
- a node's VJP closures, and so its saved arrays, are dropped as soon as it has run,
  and its incoming cotangent as soon as it has been passed on;
- contributions to one variable are summed as they arrive, into one buffer the pass
  owns (HIPS autograd #219, bb8c0bc). A cotangent is *owned* when nothing else
  can see its buffer: a fresh VJP output, or the incoming cotangent passed on to one
  parent only. Borrowed ones (add passes g to both operands; sum returns a read-only
  broadcast view) are copied once, on the second arrival, and owned from then on;
- a view of a variable used once (a transpose: `permute_dims`) need not run its
  VJP once its input has a gradient the pass owns: its consumer adds its cotangent
  straight into that gradient seen through the view (`_through_view`), so a weight
  transposed at every use (shared_linear) keeps one (D, D) buffer, not two;
- the order is a max-heap by creation number (PyTorch PR #4746), or FIFO (BFS) or
  LIFO (DFS) over ready nodes, for comparison.

In the heap order no readiness bookkeeping is needed: the pending node with the
largest creation number is always ready, because every consumer of a node was created
after it (so this is "walk the tape backwards, skipping pruned nodes"). BFS and DFS
need each node's count of consumers still to deliver.
"""

import collections
import heapq
import math
import operator

from numpy import ndarray

from harness.engine import xp
from harness.engine.prims.common import Scatter
from harness.engine.tape import Leaf

ORDERS = ("heap", "bfs", "dfs")


def check_order(order):
    if order not in ORDERS:
        raise ValueError(f"unknown backward order {order!r}; valid orders: {', '.join(ORDERS)}")
    return order


def backward(root, seed, wanted, order="heap", ledger=None):
    """Cotangents of the `wanted` leaf nodes, given cotangent `seed` at `root`.

    Consumes the graph: every node it runs loses its VJP closures and parent links.
    Returns one fresh, writable array per wanted leaf (zeros where the loss does not
    depend on it).
    """
    needed, pending = _plan(root, set(wanted))
    consumers = collections.Counter(pending)  # `pending` is the schedule's to count down
    schedule = _SCHEDULES[check_order(order)](pending)
    grads = {}  # node -> (cotangent, owned)
    if root in needed:
        grads[root] = (seed, False)
        if not isinstance(root, Leaf):
            schedule.start(root)
    while (node := schedule.pop()) is not None:
        _run(node, grads, needed, schedule, ledger, consumers)
    return [_result(grads.pop(leaf, None), ledger) for leaf in wanted]


def _run(node, grads, needed, schedule, ledger, consumers):
    """Run one node's VJP and pass its cotangents on. A function of its own so that
    every local (the incoming cotangent, the closures) is gone when it returns."""
    g, g_owned = grads.pop(node)
    if node.vjps is None:  # a rematerialised node: recompute its span first
        node.rebuild()
    parents, vjps = node.parents, node.vjps
    node.parents = node.vjps = None
    if ledger is not None:
        ledger.vjp_calls[node.name] += 1
    outgoing = []  # (parent, cotangent, already added into the parent's gradient)
    readers = [i for i, parent in enumerate(parents) if parent is not None and parent in needed]
    if len(readers) > 1:  # smallest cotangent first (a conv's dw before its dx): the big one exists the shortest
        readers.sort(key=lambda i: math.prod(parents[i].shape))
    last = readers[-1] if readers else None
    for i in readers:
        parent, vjp = parents[i], vjps[i]
        acc = unview = None
        if getattr(vjp, "adds_into", False):
            entry = grads.get(parent)  # the parent's gradient so far, if the pass owns it
            if entry is not None and entry[1]:
                acc = entry[0]
            else:
                parent, acc, unview = _through_view(grads, parent, consumers, ledger)
        if i == last and g_owned and getattr(vjp, "reuses_g", False) and _unshared(g, outgoing):
            ct = vjp(g, into=g)  # g's last reader writes its cotangent over g
        elif acc is not None:
            ct = vjp(g, add_to=acc)  # added into the parent's gradient, if it could
        else:
            ct = vjp(g)
            if type(ct) is not ndarray:
                ct = _as_array(ct, g)
        if unview is not None and ct is not acc:
            ct = unview(ct)  # made whole after all: passed on as the view's VJP would
        if ledger is not None and type(ct) is not Scatter:
            ledger.track(ct, "backward:" + node.name)  # before the release: both were live
        vjps[i] = vjp = None  # this closure's saved arrays can go now
        outgoing.append((parent, ct, acc is not None and ct is acc))
    del vjps
    if len(outgoing) == 1:  # (most nodes) one cotangent, which no sibling can share a buffer with
        parent, ct, added = outgoing.pop()
        owned = not added and type(ct) is not Scatter and (g_owned or xp.owner(ct) is not xp.owner(g)) \
            and xp.is_exclusive_view(ct)  # fmt: skip
        del g
        _deliver(node, parent, ct, added, owned, grads, schedule, ledger)
        return
    owned = _ownership([ct for _, ct, added in outgoing if not added], g, g_owned)
    del g  # from here the incoming cotangent lives on only through `outgoing`
    owned.reverse()
    outgoing.reverse()
    while outgoing:  # popped one by one: each cotangent goes once it is accumulated
        parent, ct, added = outgoing.pop()
        _deliver(node, parent, ct, added, not added and owned.pop(), grads, schedule, ledger)
        del ct


def _deliver(node, parent, ct, added, owned, grads, schedule, ledger):
    """Accumulate `ct` into `parent`'s gradient (unless the VJP `added` it already) and
    tell the schedule; `owned`: may the pass write into ct's buffer."""
    first = parent not in grads
    if not added:
        if ct.shape != parent.shape or ct.dtype != parent.dtype:
            _cotangent_mismatch(node, parent, ct)
        grads[parent] = _accumulate(grads.get(parent), ct, owned, ledger)
    del ct
    if type(parent) is not Leaf:
        schedule.delivered(parent, first)


def _plan(root, wanted):
    """The nodes from which a wanted leaf can be reached (walking from the root), and
    for each of them how many edges from other such nodes point at it."""
    order, seen = [root], {root}
    for node in order:  # (grows as it is walked) every node the root depends on
        for parent in node.parents:
            if parent is not None and parent not in seen:
                seen.add(parent)
                order.append(parent)
    # A node is made after its parents, so in creation order every node comes after
    # the nodes it reads: one pass decides, parents first, which nodes reach a wanted leaf.
    order.sort(key=operator.attrgetter("seq"))
    needed = set()
    pending = collections.Counter()
    for node in order:
        if node in wanted:
            needed.add(node)
            continue
        reads = [parent for parent in node.parents if parent in needed]
        if reads:
            needed.add(node)
            for parent in reads:
                if type(parent) is not Leaf:
                    pending[parent] += 1
    return needed, pending


class HeapSchedule:
    """Max-heap by creation number: the latest-created pending node runs first."""

    def __init__(self, pending):
        self._heap = []

    def start(self, node):
        heapq.heappush(self._heap, (-node.seq, node))

    def delivered(self, node, first):
        if first:  # creation numbers are unique, so nodes are never compared
            heapq.heappush(self._heap, (-node.seq, node))

    def pop(self):
        return heapq.heappop(self._heap)[1] if self._heap else None


class FifoSchedule:
    """Breadth-first: ready nodes (all consumers delivered) in the order they became ready."""

    def __init__(self, pending):
        self._pending = pending
        self._ready = collections.deque()

    def start(self, node):
        self._ready.append(node)

    def delivered(self, node, first):
        self._pending[node] -= 1
        if self._pending[node] == 0:
            self._ready.append(node)

    def pop(self):
        return self._ready.popleft() if self._ready else None


class LifoSchedule(FifoSchedule):
    """Depth-first: the most recently readied node first."""

    def pop(self):
        return self._ready.pop() if self._ready else None


_SCHEDULES = {"heap": HeapSchedule, "bfs": FifoSchedule, "dfs": LifoSchedule}


def _as_array(ct, g):
    if isinstance(ct, Scatter) or xp.is_array(ct):
        return ct
    return xp.array_module(g).asarray(ct)  # NumPy turns 0-d results into scalars


def _through_view(grads, parent, consumers, ledger):
    """(node, accumulator, the view's VJP) for a cotangent of `parent`: `parent`, None,
    None; or, where `parent` is a view (its VJP has `input_view`) read by this node only
    and its input already has a gradient the pass owns, that input, its gradient seen
    through the view, and the view's VJP (for a cotangent made whole after all). The
    view's node is then done: its VJP never runs."""
    nothing = parent, None, None
    if isinstance(parent, Leaf) or parent.vjps is None or consumers[parent] != 1 or parent in grads:
        return nothing
    inputs = [(p, v) for p, v in zip(parent.parents, parent.vjps) if p is not None]
    if len(inputs) != 1 or getattr(inputs[0][1], "input_view", None) is None:
        return nothing
    source, view = inputs[0]
    entry = grads.get(source)  # only nodes the pass needs ever get one
    if entry is None or not entry[1]:
        return nothing
    acc = view.input_view(entry[0])
    if acc.shape != parent.shape or acc.dtype != parent.dtype:
        return nothing
    parent.parents = parent.vjps = None  # done: its cotangent goes straight into its input's
    if ledger is not None:
        ledger.vjp_calls[parent.name] += 1
    return source, acc, view


def _unshared(g, outgoing):
    """May a VJP write its cotangent into g's buffer (the pass owns g, the VJP is
    elementwise in g: prims.common.reuses_g)? Only if no cotangent made already shares g's
    buffer (add passes g itself on; getitem a Scatter of it)."""
    mine = xp.owner(g)
    return all(xp.owner(ct.values if type(ct) is Scatter else ct) is not mine for _, ct, _ in outgoing)


def _ownership(cts, g, g_owned):
    """Which cotangents may be written in place: a buffer no other cotangent shares,
    that is not the incoming one unless that was owned, and that is not a broadcast."""
    ids = [None if type(ct) is Scatter else id(xp.owner(ct)) for ct in cts]
    g_id = id(xp.owner(g))
    return [
        i is not None and ids.count(i) == 1 and (i != g_id or g_owned) and xp.is_exclusive_view(ct)
        for i, ct in zip(ids, cts)
    ]


def _accumulate(previous, ct, owned, ledger):
    """Add cotangent `ct` to the gradient accumulated so far for one node."""
    if isinstance(ct, Scatter):
        if previous is None:
            acc = xp.array_module(ct.values).zeros(ct.shape, dtype=ct.dtype)
            _track(ledger, acc, "backward:scatter")
        else:
            acc, acc_owned = previous
            if not acc_owned:
                acc = _copy(acc, ledger)
        ct.add_into(acc)
        return acc, True
    if previous is None:
        return ct, owned  # the first arrival is kept as it is, borrowed or not
    acc, acc_owned = previous
    if acc_owned:
        acc += ct
        return previous
    if owned:
        ct += acc
        return ct, True
    acc = acc + ct  # both borrowed: one fresh buffer, owned from now on
    _track(ledger, acc, "backward:accumulate")
    return acc, True


def _cotangent_mismatch(node, parent, ct):
    raise RuntimeError(
        f"the VJP of {node.name} returned a {ct.dtype}{tuple(ct.shape)} cotangent for an "
        f"input of {parent.dtype}{tuple(parent.shape)}"
    )


def _result(entry, ledger):
    if entry is None:  # the loss does not depend on this leaf: the caller makes zeros
        return None
    g, owned = entry
    if not owned:  # the caller gets its own writable array, never a view of another
        g = _copy(g, ledger, "backward:grad")
    return g


def _copy(a, ledger, tag="backward:accumulate"):
    a = a.copy()
    _track(ledger, a, tag)
    return a


def _track(ledger, a, tag):
    if ledger is not None:
        ledger.track(a, tag)
