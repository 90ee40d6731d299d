"""The reference engine (harness/engine): NumPy on the CPU, CuPy on CUDA; eager only.

A thin adapter: the op set is ``harness.engine.ops`` itself, and gradients come from
``harness.engine.value_and_grad`` / ``vjp``. Three engine options are exposed:

- ``order``: the backward schedule, ``"heap"`` (default: max-heap by creation order,
  PyTorch's), ``"bfs"`` or ``"dfs"``: ``ReferenceAdapter(order="bfs")``, or per call
  ``value_and_grad(loss_fn, order="bfs")`` / ``split_vjp(loss_fn, order="bfs")``;
- ``remat`` (``load(remat=...)``): none, native, sqrt, revolve:S or articulation
  (harness/engine/remat.py); articulation plans from a dry trace in ``prepare``;
- the ledger (live bytes of every buffer the engine allocated, a peak and a
  timeline), the engine's counting instrument: a ``step`` / ``forward`` run under
  ``adapter.saving()`` records into a fresh ``Ledger``, left in ``adapter.last_ledger``
  for the breakdown to read (``peak_bytes``, ``timeline``, ``live_by_tag()``), as
  torch's saved-tensor hooks count only there. The measured steps (memory and time
  passes) run without it, as torch's run without hooks: it costs ~12 % of a step of
  small arrays (a weak reference and a timeline row per buffer). Build the adapter
  with ``track_memory="always"`` for a ledger in every step, or False for none; pass
  ``ledger=`` to record into your own.

CUDA: the engine computes on CuPy arrays when given them (``from_numpy(tree,
"cuda")`` is ``cupy.asarray``). Its device probe counts CuPy's memory pool through a
``cupy.cuda.MemoryHook`` (CuPy has no peak counter: docs/design.md, Evidence).
Everything CUDA-specific is at the end of this module; it has run on an H200
(docs/gpu.md), and cuda is unavailable, with the reason, where there is no GPU or no
CuPy.
"""

import contextlib
import importlib.util
import os

from harness.choices import check_choice
from harness.frameworks.base import Adapter, Unavailable


class ReferenceAdapter(Adapter):
    name = "reference"
    module = "numpy"  # the engine is part of gradmem; it needs NumPy only
    preload = ("numpy", "harness.engine")
    distributions = ("gradmem", "numpy", "cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x")
    arrays_are_numpy = True
    package = None  # gradmem's own engine: its version is the commit, not a release
    modes = ("eager",)
    compiled_as = ""
    no_predictor = "the engine counts its allocations as it runs (its ledger, in the breakdown); it plans none ahead"
    eager_as = "gradmem's engine: a tape recorded op by op, then its backward walk"
    # native = the engine's own checkpoint on the marked segments (what sqrt does too);
    # revolve takes its snapshot count: revolve:S. See harness/engine/remat.py.
    remats = ("none", "native", "sqrt", "revolve:S", "articulation")

    #: track_memory's choices: a ledger under saving() only, in every step, never
    LEDGER_CHOICES = (True, "always", False)

    def __init__(self, order="heap", track_memory=True):
        from harness.engine.backward import ORDERS  # the engine imports NumPy only

        self.order = check_choice("reference order", order, ORDERS)
        if track_memory not in self.LEDGER_CHOICES:
            raise ValueError(f"track_memory must be one of {self.LEDGER_CHOICES}, got {track_memory!r}")
        self.track_memory = track_memory
        self._counting = False  # inside saving()
        self.last_ledger = None
        self.device = "cpu"

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        self.check_remat(remat)
        if device == "cuda":
            self.cuda_device()
        from harness import engine
        from harness.frameworks.autograd import fix_numpy_blas_threads

        self._settings = fix_numpy_blas_threads()
        self._settings.update(
            {"reference.order": self.order, "reference.ledger": _LEDGER_SETTING[self.track_memory], "reference.remat": remat}
        )
        self.device = device
        self.ops = engine.ops
        self.plan = engine.remat.Plan(remat)
        return self

    def prepare(self, loss_fn, params, inputs, name="graph"):
        """Before the measured window: articulation plans its snapshots from one
        traced forward pass; Unavailable (from the engine's TooFewSeparators) when the
        graph `name` has no separators worth using. Other plans need nothing."""
        if self.plan.strategy != "articulation":
            return
        from harness import engine
        from harness.engine.remat_articulation import TooFewSeparators, plan_articulation

        def trace():
            with engine.trace.tracing(None):
                return loss_fn(self.ops, engine.api.boxed_leaves(params), inputs)

        try:
            articulation = plan_articulation(trace, name)
        except TooFewSeparators as refusal:  # a property of the graph, not a failure
            raise Unavailable(str(refusal)) from refusal
        self.plan = engine.remat.Plan("articulation", articulation)
        self._settings["reference.articulation"] = self.plan.articulation.summary()

    def cuda_device(self):
        reason = _cuda_unavailable_reason()
        if reason:
            raise Unavailable(reason)
        return "cuda"  # CuPy's current device

    def from_numpy(self, tree, device="cpu"):
        if device == "cuda":
            import cupy

            return {k: cupy.asarray(v) for k, v in tree.items()}
        return dict(tree)

    def to_numpy(self, tree):
        import numpy as np

        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        if type(tree).__module__.partition(".")[0] == "cupy":
            import cupy

            return cupy.asnumpy(tree)  # waits for the device
        return np.asarray(tree)

    def sync(self, tree):
        if self.device == "cuda":
            import cupy

            cupy.cuda.get_current_stream().synchronize()
        return tree

    # ---- gradients ----------------------------------------------------------------
    def _ledger(self, ledger):
        from harness.engine import Ledger

        if ledger is None and (self.track_memory == "always" or (self.track_memory and self._counting)):
            ledger = Ledger()
        self.last_ledger = ledger
        return ledger

    def value_and_grad(self, loss_fn, mode="eager", *, order=None, ledger=None):
        """The base contract, plus the engine's options: `order` (None: the adapter's)
        and `ledger` (None: a fresh one per step, in `last_ledger`)."""
        self.check_mode(mode)
        from harness import engine

        order = self.order if order is None else order
        ops = self.ops

        def step(params, inputs):
            run = engine.value_and_grad(
                self._under_plan(loss_fn, ops, inputs), argnums=0, order=order, ledger=self._ledger(ledger)
            )
            return run(params)

        return step

    def split_vjp(self, loss_fn, mode="eager", *, order=None, ledger=None):
        """forward traces the loss (the engine's tape keeps what the VJPs need);
        backward walks it once, releasing each node's saved arrays as it goes."""
        self.check_mode(mode)
        from harness import engine

        order = self.order if order is None else order
        ops = self.ops

        def forward(params, inputs):
            return engine.vjp(
                self._under_plan(loss_fn, ops, inputs), params, argnums=0, order=order, ledger=self._ledger(ledger)
            )

        def backward(state):
            return state[1]()

        return forward, backward

    def _under_plan(self, loss_fn, ops, inputs):
        """The traced loss, run under the adapter's remat plan (the plan shapes what
        the forward pass records; the backward pass follows what was recorded)."""
        from harness.engine.remat import remat_plan

        def traced(p):
            with remat_plan(self.plan):
                return loss_fn(ops, p, inputs)

        return traced

    # ---- the breakdown's hooks ---------------------------------------------------------
    @contextlib.contextmanager
    def saving(self):
        """The steps run inside record into a fresh ledger each (track_memory True):
        the breakdown's and saved_by_op's steps, never the measured ones."""
        was, self._counting = self._counting, True
        try:
            yield
        finally:
            self._counting = was

    def saved_activation_bytes(self, state, params, inputs):
        """The ledger's live bytes at the end of forward: every buffer the engine made
        that is still alive then is held by a VJP (the tape keeps nothing else), once
        per buffer; the caller's params and inputs are never in the ledger."""
        ledger = self.last_ledger
        if ledger is None:
            return None, _NO_LEDGER
        loss = getattr(state[0], "nbytes", 0)
        method = "the engine's ledger: live bytes at the end of forward, once per buffer, less the loss scalar"
        return ledger.live_bytes - loss, method

    def saved_by_op(self, state, params, inputs):
        """The ledger's live buffers at the end of forward, by the primitive that made
        each (its tag), less the loss: the same buffers `saved_activation_bytes` sums."""
        ledger = self.last_ledger
        if ledger is None:
            return None, _NO_LEDGER
        from harness.engine import xp
        from harness.engine.ledger import key

        loss = key(state[0]) if xp.is_array(state[0]) else None
        entries = [(address, nbytes, tag.split(":", 1)[-1], ledger.reasons(address))
                   for address, nbytes, tag in ledger.live_buffers() if address != loss]
        return entries, ("the engine's ledger: each buffer live at the end of forward, under the primitive that made "
                         "it; read_by: the VJPs that saved it and what they compute with it")

    def backward_detail(self, run_backward):
        """What the backward holds at its highest point and what it allocates, by what
        made each buffer (the ledger's tags): saved activations (forward:*), recomputed
        ones (recompute:*), gradient accumulation (backward:accumulate/scatter/grad:
        running sums and gradient copies), cotangents of each primitive (backward:<primitive>:
        what its VJP made), seed and zeros: {"at_peak": {role: bytes}, "allocated": {role: bytes}}."""
        ledger = self.last_ledger
        if ledger is None:
            return None
        ledger.watch_peak()
        run_backward()
        return {"at_peak": _by_role(ledger.peak_by_tag), "allocated": _by_role(ledger.allocated_by_tag)}

    # ---- CUDA: everything device-specific for the reference engine is below ---------
    def set_matmul_precision(self, device, precision):
        if device == "cpu":
            return super().set_matmul_precision(device, precision)
        # CuPy reads CUPY_TF32 when it starts: unset, cuBLAS computes float32 in float32
        found = os.environ.get("CUPY_TF32", "unset")
        return f"CuPy: CUPY_TF32={found} ({'tensor cores' if found == '1' else 'full float32'}; read at import)"

    def device_memory_probe(self, device):
        if device != "cuda":
            return None
        import cupy

        return CupyPoolProbe(cupy)


_LEDGER_SETTING = {True: "in the breakdown's steps (saving()), not the measured ones", "always": "every step",
                   False: "off"}
_NO_LEDGER = "the engine ran without its ledger (outside saving(), or track_memory=False)"

#: ledger tag (or "phase:*") -> role, for `backward_detail`
_ROLES = {
    "backward:accumulate": "gradient accumulation",
    "backward:scatter": "gradient accumulation",
    "backward:grad": "gradient accumulation",
    "backward:seed": "seed and zeros",
    "backward:zeros": "seed and zeros",
    "backward:*": "cotangents",
    "forward:*": "saved activations",
    "recompute:*": "recomputed activations",
}


def _by_role(by_tag):
    roles = {}
    for tag, nbytes in (by_tag or {}).items():
        phase, _, primitive = tag.partition(":")
        role = _ROLES.get(tag) or _ROLES.get(phase + ":*", "other")
        if role == "cotangents":  # whose VJP made it: the op a pending gradient comes from
            role = f"cotangents of {primitive}"
        roles[role] = roles.get(role, 0) + nbytes
    return roles


class CupyPoolProbe:
    """CuPy's default memory pool, which every CuPy array the engine makes comes from.

    ``current_bytes`` is the pool's ``used_bytes()`` (blocks handed out, rounded to
    512 B); the peak is that at ``reset()`` plus the largest net growth since, counted
    by a MemoryHook from the ``mem_size`` of each pool malloc and free. ``reserved``
    is the pool's ``total_bytes()`` (used + cached free blocks). Not seen: cuBLAS
    workspaces and other allocations outside the pool (NVML sees those). MemoryHooks
    are per thread: the probe must be made in the thread that runs the steps.
    """

    peak_since_reset = True
    method = "CuPy memory pool, peak counted by a cupy.cuda.MemoryHook"

    def __init__(self, cupy):
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.hook = _peak_hook_class(cupy)()
        self.hook.__enter__()  # registers the hook for this thread, for the probe's life
        self.base_used = 0

    def _sync(self):
        self.cupy.cuda.get_current_stream().synchronize()

    def reset(self):
        self._sync()
        self.base_used = self.pool.used_bytes()
        self.hook.growth = self.hook.peak_growth = 0

    def current_bytes(self):
        self._sync()
        return self.pool.used_bytes()

    def peak_bytes(self):
        self._sync()
        return self.base_used + self.hook.peak_growth

    def reserved_bytes(self):
        self._sync()
        return self.pool.total_bytes()

    def close(self):
        self.hook.__exit__(None, None, None)


def _peak_hook_class(cupy):
    class PeakHook(cupy.cuda.MemoryHook):
        """Net bytes malloc'd from the pool since the last reset, and their maximum."""

        name = "gradmem_peak"

        def __init__(self):
            self.growth = self.peak_growth = 0

        def malloc_postprocess(self, **kw):
            self.growth += kw["mem_size"]
            self.peak_growth = max(self.peak_growth, self.growth)

        def free_postprocess(self, **kw):
            self.growth -= kw["mem_size"]

    return PeakHook


def _cuda_unavailable_reason():
    """"" when the engine can run on a CUDA GPU here (CuPy and a device), else why not."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed: the reference engine runs on CUDA through CuPy (pip install cupy-cuda12x)"
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as err:
        return f"CuPy finds no usable CUDA device ({err})"
    return "" if count > 0 else "CuPy finds no CUDA device"
