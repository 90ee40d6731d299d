"""Automatic checkpointing at the graph's separators ("articulation points").

A node s separates the graph when everything computed before it reaches what comes
after it only through s: no edge jumps over it in creation order (edges from leaves,
the parameters, do not count: they are live anyway). Keeping only a few separators'
values and recomputing the nodes between two of them (a *span*) in the backward pass
is then always possible, whatever the model: the span's inputs are its first
separator, the parameters and data, all kept.

`plan_articulation` traces the loss once (before the measured window), finds the
separators and picks about sqrt(#separators) of them, evenly by stored bytes, as
snapshots. When the separators cannot split the graph into small spans (the largest
gap between two separators holds more than half the bytes the graph stores), it
raises `TooFewSeparators`, naming the graph: a U-Net's skip connections jump over
every node between an encoder block and its decoder, so it has none where it
matters (cybertronai/gradient-checkpointing #11).

Under the plan (`recording_spans`), each node inside a span is recorded as a `Lazy`
node holding its *recipe* (the primitive, its parameters, its operands: the span's
own nodes by reference, anything else by value) instead of VJP closures, so nothing a
VJP would save is kept. When the backward pass first reaches a span, `Span.rebuild`
recomputes it from its recipes and gives its nodes their VJPs, which then save what
they need until they run, as in a plain backward pass.
"""

import collections
import math

from harness.engine.tape import Lazy, make_node, make_vjps, making_nodes, track_output
from harness.engine.trace import current_ledger, current_order, tracing


class TooFewSeparators(ValueError):
    """The graph has too few separators for articulation checkpointing to lower its peak."""


# ---- planning: a dry trace --------------------------------------------------------------
class _Census:
    """A node maker that numbers the nodes of a trace and records each one's name,
    output bytes and the numbers of its non-leaf parents."""

    def __init__(self):
        self.index = {}  # node -> its number in the trace
        self.nodes = []  # (name, nbytes, parent numbers)

    def __call__(self, prim, values, params, parents, out):
        node = make_node(prim, values, params, parents, out)
        self.index[node] = len(self.nodes)
        self.nodes.append((prim.name, out.nbytes, [self.index[p] for p in parents if p is not None and p in self.index]))
        return node


class ArticulationPlan:
    """The snapshots chosen for one graph, and what the planning found."""

    def __init__(self, graph, names, separators, snapshots, stored_bytes, largest_gap_share):
        self.graph = graph
        self.names = names  # node number -> primitive name: checked again when running
        self.separators = separators
        self.snapshots = snapshots  # sorted node numbers; spans lie between consecutive ones
        self.stored_bytes = stored_bytes
        self.largest_gap_share = largest_gap_share

    def span_of(self, k):
        """The span number of node k (None: outside every span, recorded as usual).
        Span j holds the nodes after snapshot j up to and including snapshot j + 1."""
        s = self.snapshots
        if not s or k <= s[0] or k > s[-1]:
            return None
        lo, hi = 0, len(s) - 1  # the last snapshot index j with s[j] < k
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if s[mid] < k else (lo, mid)
        return lo

    def summary(self):
        return (
            f"{self.graph}: {len(self.names)} nodes, {len(self.separators)} separators, "
            f"{len(self.snapshots)} snapshots, largest gap {self.largest_gap_share:.0%} of the stored bytes"
        )


def plan_articulation(trace, graph="graph"):
    """Trace once with ``trace()`` (a call that runs the forward pass under `tracing`)
    and plan the snapshots; TooFewSeparators when the graph cannot be split."""
    census = _Census()
    with making_nodes(census):
        out = trace()
    del out
    nodes = census.nodes
    separators = find_separators(nodes)
    stored = [nbytes for _, nbytes, _ in nodes]
    total = sum(stored) or 1
    gaps = _gap_bytes(separators, stored)
    share = max(gaps) / total
    if share > 0.5:
        raise TooFewSeparators(
            f"articulation checkpointing cannot help on {graph}: of its {len(nodes)} nodes "
            f"{len(separators)} separate the graph, and the largest stretch between two "
            f"separators holds {share:.0%} of the {_mib(total)} it stores "
            "(anything over 50% leaves no plan that lowers the peak much). Skip connections "
            "jump over every node between an encoder block and its decoder, so a U-Net has "
            "no separators where it matters (cybertronai/gradient-checkpointing #11): mark "
            "segments with ops.checkpoint and use --remat sqrt or native instead."
        )
    snapshots = choose_snapshots(separators, stored)
    return ArticulationPlan(graph, [name for name, _, _ in nodes], separators, snapshots, total, share)


def _mib(nbytes):
    return f"{nbytes / 2**20:.2f} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:.1f} KiB"


def find_separators(nodes):
    """Numbers of the nodes no edge jumps over: for every edge u -> w with u < k < w,
    k is not a separator. Nodes are numbered in creation order, so edges go forward;
    a sweep counts the edges open over each position. The last node (the loss) is
    not a separator: nothing comes after it."""
    opened = [0] * (len(nodes) + 1)
    for w, (_, _, parents) in enumerate(nodes):
        for u in parents:
            if w - u > 1:  # the edge is open over u + 1 .. w - 1
                opened[u + 1] += 1
                opened[w] -= 1
    separators, over = [], 0
    consumed = {u for _, _, parents in nodes for u in parents}
    for k in range(len(nodes)):
        over += opened[k]
        if over == 0 and k in consumed:
            separators.append(k)
    return separators


def _gap_bytes(separators, stored):
    """Bytes stored by the nodes of each stretch between consecutive separators (and
    before the first, after the last)."""
    cuts = [-1] + separators + [len(stored) - 1]
    return [sum(stored[a + 1 : b + 1]) for a, b in zip(cuts, cuts[1:])]


def choose_snapshots(separators, stored):
    """About sqrt(#separators) separators, evenly spaced by the bytes stored before
    them, so each span stores about the same."""
    if not separators:
        return []
    count = math.isqrt(len(separators) - 1) + 1
    before = _prefix(stored)
    total = before[-1] or 1
    chosen = []
    for j in range(count):
        target = total * (j + 0.5) / count
        best = min(separators, key=lambda k: abs(before[k + 1] - target))
        if best not in chosen:
            chosen.append(best)
    return sorted(chosen)


def _prefix(values):
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return out


# ---- running under a plan ---------------------------------------------------------------
class _SpanRecorder:
    """The node maker of a run under a plan: plain nodes outside the spans, Lazy nodes
    with recipes inside them."""

    def __init__(self, plan):
        self.plan = plan
        self.count = 0
        self.spans = {}

    def __call__(self, prim, values, params, parents, out):
        k, self.count = self.count, self.count + 1
        if k >= len(self.plan.names) or self.plan.names[k] != prim.name:
            raise RuntimeError(
                f"articulation plan for {self.plan.graph}: node {k} is {prim.name}, but the "
                "planning trace had " + (repr(self.plan.names[k]) if k < len(self.plan.names) else "fewer nodes")
                + "; the loss must record the same graph on every call"
            )
        j = self.plan.span_of(k)
        if j is None:
            return make_node(prim, values, params, parents, out)
        span = self.spans.get(j)
        if span is None:
            span = self.spans[j] = Span(current_ledger(), current_order())
        return span.record(prim, values, params, parents, out)


class Span:
    """The recipes of one span's nodes, rebuilt together when the backward pass needs one."""

    def __init__(self, ledger, order):
        self.ledger, self.order = ledger, order
        self.recipes = []  # (node, prim, operands, params); an operand is ("node", Lazy) or ("value", v)
        self.members = set()

    def record(self, prim, values, params, parents, out):
        """The Lazy node of one call; its operands from this span are kept as nodes,
        all others (the first snapshot, parameters, data, static args) by value."""
        node = Lazy(prim.name, parents, out.shape, out.dtype, self.rebuild)
        operands = []
        for i, value in enumerate(values):
            parent = parents[i] if i < len(parents) else None
            operands.append(("node", parent) if parent in self.members else ("value", value))
        self.members.add(node)
        self.recipes.append((node, prim, operands, params))
        return node

    def rebuild(self):
        """Recompute every node of the span, in creation order, and make its VJPs. A
        value goes as soon as its last consumer in the span has run (unless a VJP saved it)."""
        recipes, self.recipes, self.members = self.recipes, None, None
        uses = collections.Counter(ref for _, _, operands, _ in recipes for kind, ref in operands if kind == "node")
        values = {}
        with tracing(self.ledger, "recompute", self.order):
            for node, prim, operands, params in recipes:
                args = []
                for kind, ref in operands:
                    if kind == "node":
                        args.append(values[ref])
                        uses[ref] -= 1
                        if uses[ref] == 0:
                            del values[ref]
                    else:
                        args.append(ref)
                out = prim.run_forward(args, params)
                if self.ledger is not None:
                    track_output(self.ledger, out, args[: len(node.parents)], "recompute:" + prim.name)
                node.vjps = make_vjps(prim, args, params, node.parents, out)
                del args
                if uses[node]:
                    values[node] = out
                del out


def recording_spans(plan):
    """A context in which traced ops follow `plan` (nodes inside spans are Lazy)."""
    return making_nodes(_SpanRecorder(plan))

