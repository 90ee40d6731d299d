"""The predicted peak of a chain under a remat plan, from the ledger model, without running.

The chain is chained_dot's: n steps ``x_{i+1} = matmul(c, x_i)`` of `state_bytes` each,
one const c of `const_bytes`, the loss ``sum(x_n)``; x_0 and c are the caller's (not
counted, like the inputs in the ledger). The rules the engine follows, and so the
events replayed here in its order:

- a recorded step saves its input state, which its const's cotangent needs; it is
  freed once its only saver (the next step's VJP) has run;
- a step's VJP makes the const's cotangent, releases the saved state, then makes the
  state's cotangent; the incoming cotangent goes after both are made, unless someone
  outside the pass holds it (the seed of a nested pass);
- the const's cotangents accumulate in place: in one backward pass the first is kept
  and later ones are added into it a row block at a time (prims/linalg.py's product_cotangent: a
  transient inside NumPy calls, which the ledger does not see); a recomputed segment's
  or a revolve step's, made by its own pass, is added and freed;
- a step run on raw values allocates its output while its input is still alive.

`simulate_chain` returns the peak live bytes the ledger should measure; the tests
compare it with the ledger within 5 %.
"""

from harness.remat_strategies import parse_remat, sqrt_segments


class _Tally:
    def __init__(self):
        self.live = self.peak = 0

    def __call__(self, nbytes):
        self.live += nbytes
        self.peak = max(self.peak, self.live)


def simulate_chain(remat, n, state_bytes, const_bytes):
    """Predicted peak live bytes of chained_dot's chain (n steps) under `remat`."""
    strategy, arg = parse_remat(remat)
    model = _Chain(state_bytes, const_bytes)
    if strategy == "none":
        model.plain(n)
    elif strategy in ("sqrt", "native"):
        model.segmented(n)
    elif strategy == "revolve":
        model.revolve(n, arg)
    else:
        raise ValueError(f"simulate_chain models none, native, sqrt and revolve:S, not {remat!r}")
    return model.t.peak


class _Chain:
    def __init__(self, X, C):
        self.X, self.C, self.t = X, C, _Tally()
        self.acc = False  # whether the outer const gradient exists yet
        self.chain_acc = False  # revolve: whether the chain's own const gradient exists yet
        self.seed_is_ours = False  # revolve: whether the carried cotangent is the pass's own

    # -- pieces --------------------------------------------------------------------------
    def raw_steps(self, count, keep_input=True):
        """count steps on raw values: each output is allocated while its input lives;
        inputs other than the first are dropped as the next one is made."""
        for i in range(count):
            self.t(self.X)
            if i > 0 or not keep_input:
                self.t(-self.X)

    def reverse_recorded(self, s, seed_is_ours, frees_first_input, wants_first_cotangent):
        """Backprop through s recorded steps (insides x_1..x_{s-1} live) from the seed;
        leaves one const cotangent (C) and, if wanted, the first input's (X)."""
        X, C, t = self.X, self.C, self.t
        for k in range(s, 0, -1):
            if k == s:
                t(C)  # the const's first cotangent; the later ones are added into it
            if k > 1 or frees_first_input:
                t(-X)  # the saved input goes with its closure
            if k > 1 or wants_first_cotangent:
                t(X)  # the input's cotangent
            if k < s or seed_is_ours:
                t(-X)  # the incoming cotangent

    def accumulate_outer(self):
        if self.acc:
            self.t(-self.C)
        self.acc = True

    # -- plans ---------------------------------------------------------------------------
    def plain(self, n):
        X, t = self.X, self.t
        for _ in range(n):
            t(X)
        t(-X)  # sum keeps only the shape: x_n goes
        self.reverse_recorded(n, seed_is_ours=False, frees_first_input=False, wants_first_cotangent=False)

    def segmented(self, n):
        X, t = self.X, self.t
        segments = sqrt_segments(n)
        for a, b in segments:
            self.raw_steps(b - a)
        t(-X)  # x_n
        for j, (a, b) in reversed(list(enumerate(segments))):
            t(X * (b - a))  # recomputed, recorded
            t(-X)  # its output is not needed
            self.reverse_recorded(b - a, seed_is_ours=False, frees_first_input=a > 0, wants_first_cotangent=a > 0)
            if j < len(segments) - 1:
                t(-X)  # the segment's incoming cotangent (x_n's is a broadcast scalar)
            self.accumulate_outer()

    def revolve(self, n, snapshots):
        from harness.engine.remat_revolve import first_sweep

        X, t = self.X, self.t
        parts, last = first_sweep(n, snapshots)
        for a, b, _ in parts:
            self.raw_steps(b - a, keep_input=True)  # x_b is kept: a split point or x_{n-1}
        t(X)  # x_n from x_{n-1}
        t(-X)  # sum keeps only the shape
        self.taped(frees_input=True)  # the last step, from x_{n-1}, which goes with it
        for a, b, c in reversed(parts):
            self.reverse(a, b, c, need_x=a > 0)
            if a > 0:
                t(-X)  # x_a, held by the loop until its part is reversed
        self.accumulate_outer()

    def reverse(self, a, b, c, need_x=True):
        from harness.engine.remat_revolve import split

        while b - a > 1:
            m = a + split(b - a, c)
            self.raw_steps(m - a)  # x_m is kept
            self.reverse(m, b, c - 1)
            self.t(-self.X)  # x_m
            b = m
        self.taped(frees_input=False, need_x=need_x)

    def taped(self, frees_input, need_x=True):
        """One step recorded and backpropagated from the carried cotangent; the
        const's cotangent joins the chain's own accumulator."""
        X, C, t = self.X, self.C, self.t
        t(X)
        t(-X)  # the recorded output is not needed
        t(C)
        if frees_input:
            t(-X)
        if need_x:
            t(X)
        if self.seed_is_ours:
            t(-X)
        self.seed_is_ours = True
        if self.chain_acc:
            t(-C)
        self.chain_acc = True
