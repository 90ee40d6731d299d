"""The traces running now: which ledger accounts them, in which phase, for which
backward order.

A stack of (ledger, phase, order), the innermost last. Ops read the ledger from it, so
a forward pass is accounted without passing a ledger to each op (tape.apply, and
saving.save for the copies it makes); a checkpointed segment reads the ledger and
order its recomputation will use. It imports nothing of the engine: the tape and
`save` both read it.
"""

import contextlib

#: (ledger, phase, order) of each trace running now, the innermost last
stack = []


@contextlib.contextmanager
def tracing(ledger, phase="forward", order="heap"):
    """Run the body as a trace accounted in `ledger` (None: no accounting); `order` is
    the backward schedule of the pass that will consume it."""
    stack.append((ledger, phase, order))
    try:
        yield
    finally:
        stack.pop()


def current_ledger():
    return stack[-1][0] if stack else None


def current_order():
    return stack[-1][2] if stack else "heap"


def current_phase():
    return stack[-1][1] if stack else "forward"
