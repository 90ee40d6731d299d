"""tinygrad: the op set on ``tinygrad.Tensor``; lazy eager and ``TinyJit``.

tinygrad is lazy all the way: an op records a node, ``realize`` schedules the graph
into kernels (fusing elementwise chains, and recomputing cheap values instead of
storing them), renders them as C and builds them with ``clang`` on the CPU device. It
has no checkpoint API: what to keep and what to recompute is its scheduler's choice,
which is the memory behaviour this row shows.

Ops map one to one, NCHW/OIHW like the contract: ``Tensor.conv2d``, ``max_pool2d``
(stride = size, ragged edges dropped), ``interpolate(mode="nearest")``, tensor
indexing ``x[idx]`` for ``take`` (what ``nn.Embedding`` does), ``logsumexp``,
``softmax``, ``cumsum``, ``Tensor.where``, ``cat``, ``stack``. Binary elementwise ops
are the Python operators; a Python number never changes a tensor's dtype.

The gradient step realises the loss and **every** gradient in one ``Tensor.realize``
call, as tinygrad's own training loops do: realising them one at a time schedules the
shared forward again for each (measured: 10x the time, 2.5x the memory).

Modes:

- ``"eager"``: the lazy graph of the step, scheduled and run at the ``realize``.
  Kernels are compiled by clang on first use (seconds per workload) and kept in
  tinygrad's disk cache (``~/.cache/tinygrad/cache.db``; ``CACHEDB`` moves it), as
  Inductor's cache is for torch.compile.
- ``"compiled"``: ``TinyJit`` around the step: the first call runs eagerly, the second
  captures the kernels and buffers, later calls replay the captured kernels with no
  Python scheduling. Its output tensors live in the JIT's own buffers, which the next
  call overwrites: the harness reads them before calling again.

``split_vjp``: None, the phases are measured together: there is no forward to run
apart (nothing runs before ``realize``), and realising the loss first would make the
scheduler keep or recompute differently.

Memory: tinygrad's CPU allocator keeps freed buffers in an LRU cache and serves later
steps from it, and a ``TinyJit`` allocates its step's buffers (intermediates and
outputs, in one planned arena) once, on the capturing call, and reuses them for every
later call. Measured as they were, a step's peak above its start was what neither
could serve (chained_dot small: 484 KiB eager, 0.0 MiB compiled, 0.01x the bound): a
figure of what was already held, not of what the step needs. So the memory pass runs
with the LRU cache off (``helpers.LRU = 0``, cached buffers freed:
`buffer_cache_off`), and for a TinyJit the buffers it keeps for its step are counted
(their ``Buffer.nbytes``, each base once) into the step peak and out of retained
(`step_held_bytes`; the footprint is unchanged): they cannot be handed back between
steps (tinygrad 0.14's CPU buffers are shared anonymous mmaps that the JIT's buffer
views keep mapped after ``CapturedJit.free_intermediates()``: measured, RSS did not
drop), so RSS alone would file them under retained. What the cache and the JIT hold
between steps as tinygrad users run it is measured after the measured steps with the
cache on again: the record's ``buffer_cache``. The time pass runs with the cache on.
Kernels compiled in the first step stay loaded (their code is retained).

On CUDA the record's ``device_memory`` is tinygrad's own count of the bytes its buffers
hold on the device, with a peak per phase (`MemUsedProbe`), the cache off as on the
CPU; NVML's figure beside it adds the CUDA context and kernels. A TinyJit's buffers are
allocated on its capturing call and held between steps, so there they are retained
device bytes, and its step allocates nothing above its start.

Breakdown (harness/measure/breakdown.py): the saved activations are null with the
no-split reason; params, inputs and gradients are counted by their device buffers
(``buffer_bytes``).

clang: tinygrad's CPU device compiles its own start-up programs with ``$CC`` (default
``clang``) using clang-only flags; without it the device fails with "no usable
devices". ``available()`` says so; ``make setup``/``make test`` run
tools/ensure_clang.sh, which installs Debian's clang as root.

sin/cos: tinygrad computes them in software (range reduction and polynomials,
``TRANSCENDENTAL``), and its scheduler inlines an elementwise result into every kernel
that reads it: tiny_nerf's positional encoding (12 sin/cos of the inputs, concatenated,
read by the first and fifth layers' matmuls and their gradients) became a handful of
huge kernels whose code generation took longer than the check's 900 s at ``tiny``.
``.contiguous()`` after ``sin``/``cos`` is how tinygrad users make a value a buffer of
its own (it keeps the gradient; ``realize`` cuts it: the gradient through a realized
value came out 0): the polynomial is computed once, and the check's first step took
40-48 s (docs/frameworks.md).

Threads: ``NUM_CPU_THREADS`` (the CPU device's kernel threads) from GRADMEM_THREADS.

Older releases (the release sweep, docs/releases.md): written against 0.14; where an
older release names a knob otherwise, the adapter uses what that release has, each
fallback commented with the releases that need it: threads through ``CPU_COUNT``
(0.12-0.13; set before the C renderer is imported), none in 0.10.x-0.11 (one kernel
thread: the settings say so); the CPU device chosen by ``Device.DEFAULT`` (no ``DEV``
before 0.13) and named ``CLANG`` in 0.10.1; ``Tensor.lazydata`` and ``tinygrad.ops``
in 0.10.x; a TinyJit's buffers read from its captured ExecItems before 0.13
(`_jit_cache_buffers`); the buffers' page kind read from the CPU allocator (0.11's
and 0.10.x's are anonymous, not shmem). 0.11's allocator freed a buffer under a
kernel still queued on the device's thread once the cache was off (SIGSEGV): its frees
synchronise the device first, as 0.12+ do (`_synchronize_before_free`, said in the
record's ``buffer_cache``). 0.10.0 has no ``Tensor.gradient``: unavailable.

Sync: the CPU device runs kernels on threads of its own, so ``sync`` waits for the
device (``Device.synchronize``) after realizing: a TinyJit replay returns when its
kernels are queued, and on 0.11-0.13 (small chained_dot) the 48-96 MiB of buffers its
replays write became resident one or two steps after the step that wrote them, outside
that step's window (its retained came out negative once those buffers were counted into
its peak). 0.14's figures did not move with it (the buffers are resident from the
capturing call); its compiled *time* now includes the kernels, not only their queueing.

Optimizer: the base class's functional SGD/Adam on the op set, its new params and
moments realised in one schedule (``optimizer``); ``tinygrad.nn.optim`` updates
tensors in place through their ``.grad``, which the step's returned gradients are not.
"""

import functools
import os
import shutil
import sys
import types
from collections import defaultdict

from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import Adapter, Unavailable


class TinygradAdapter(Adapter):
    name = "tinygrad"
    module = "tinygrad"
    distributions = ("tinygrad",)
    modes = ("eager", "compiled")
    installs_from_source = True  # pure Python (kernels are compiled at run time): `bisect --repo` installs a commit with pip
    compiled_as = "TinyJit(step): kernels captured on the 2nd call, replayed without Python scheduling"
    no_predictor = "none found in its API (its scheduler's buffer plan is internal)"
    eager_as = "the lazy graph of loss and gradients, scheduled by one Tensor.realize(loss, *grads)"
    remats = ("none",)
    environment = {}

    def __init__(self):
        self.device = "cpu"
        self._jits = []  # the TinyJits this adapter made (their buffers: step_held_bytes)

    def available(self):
        ok, reason = super().available()
        if not ok:
            return ok, reason
        compiler = os.environ.get("CC", "clang")
        if shutil.which(compiler) is None:
            return False, (f"tinygrad's CPU device needs the {compiler!r} binary, which is not on PATH "
                           "(apt-get install clang; tools/ensure_clang.sh does it as root)")
        return True, ""

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        self.check_remat(remat)
        ok, reason = self.available()
        if not ok:
            raise Unavailable(reason)
        count = threads.thread_count()
        from tinygrad import Device, Tensor, helpers

        if not hasattr(Tensor, "gradient"):  # 0.10.0: backward() into .grad only
            raise Unavailable("this tinygrad has no Tensor.gradient (the step takes the loss's gradients "
                              "with it, as returned values; 0.10.0 has only backward() into .grad)")
        thread_knob = _set_cpu_threads(helpers, count)
        if device == "cuda":
            _use_cuda_or_raise(Device, helpers)
        else:
            _use_cpu(Device, helpers)
        self.device = device
        self._settings = {
            "threads": count,
            **thread_knob,
            "tinygrad device": Device.DEFAULT,
            "CC": os.environ.get("CC", "clang"),
            "kernel cache": str(helpers.CACHEDB),
            "evaluation": "one Tensor.realize(loss, *grads) per step",
            "remat": "none (tinygrad has no checkpoint API; its scheduler decides what to recompute)",
        }
        self.ops = _make_ops()
        return self

    def cuda_device(self):
        from tinygrad import Device

        try:
            return Device["CUDA"]
        except Exception as err:  # noqa: BLE001 - any failure to open it means no CUDA here
            raise Unavailable(f"tinygrad cannot open its CUDA device: {type(err).__name__}: {err}") from err

    def from_numpy(self, tree, device="cpu"):
        from tinygrad import Tensor

        # A 0-d Tensor made from NumPy is a CONST node, not a buffer, and tinygrad
        # hash-conses nodes: two scalar params of equal value became one node and got
        # the sum of both gradients (and TinyJit refuses a const input). A 1-element
        # buffer viewed as 0-d is a real, separate leaf.
        return {k: Tensor(v.reshape(1)).realize().reshape(()) if v.ndim == 0 else Tensor(v).realize()
                for k, v in tree.items()}

    def to_numpy(self, tree):
        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        return tree.numpy()

    def sync(self, tree):
        from tinygrad import Device, Tensor

        tensors = list(tree.values()) if isinstance(tree, dict) else [tree]
        tensors = [t for t in tensors if isinstance(t, Tensor)]
        if tensors:
            Tensor.realize(*tensors)
        # The CPU device runs kernels on threads of its own (HCQ queues, 0.11+) and a
        # TinyJit replay returns once they are queued: realize() of its already-realized
        # outputs waits for nothing. Measured on 0.11-0.13: the replays' buffers became
        # resident one or two steps late, in a later step's window (module docstring).
        Device[Device.DEFAULT].synchronize()
        return tree

    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        from tinygrad import Tensor, TinyJit

        ops = self.ops

        def step(params, inputs):
            names = list(params)
            loss = loss_fn(ops, params, inputs)
            grads = loss.gradient(*(params[k] for k in names))
            Tensor.realize(loss, *grads)  # one schedule for the loss and every gradient
            return loss, dict(zip(names, grads))

        if mode == "compiled":
            run = _jitted(step, TinyJit)
            self._jits.append(run.jit)
            return run
        return step

    # ---- the buffer cache and the JIT's buffers (module docstring, "Memory") ---------
    def buffer_cache_off(self):
        from tinygrad import Device, helpers

        # LRUAllocator.free reads it on every free (0.10.1+ import this ContextVar by name)
        helpers.LRU.value = 0
        allocator = Device[Device.DEFAULT].allocator
        synced = _synchronize_before_free(allocator)
        allocator.free_cache()
        return "tinygrad's LRU buffer cache off (helpers.LRU = 0, cached buffers freed)" + synced

    def buffer_cache_on(self):
        from tinygrad import helpers

        helpers.LRU.value = 1

    def step_held_bytes(self):
        held = sum(_jit_buffer_bytes(jit) for jit in self._jits)
        if not held:
            return None
        return held, _buffer_page_kind(), ("the buffers TinyJit allocated on its capturing call and reuses every call "
                               "(tinygrad Buffer.nbytes of the captured program's buffers, each base once)")

    def buffer_cache_bytes(self):
        from tinygrad import Device

        cache = Device[Device.DEFAULT].allocator.cache
        cached = sum(size * len(opaques) for (size, _), opaques in cache.items())
        held = sum(_jit_buffer_bytes(jit) for jit in self._jits)
        return cached + held, ("the LRU cache's buffers (LRUAllocator.cache) plus the allocated buffers TinyJit "
                               f"keeps between calls ({held} bytes)")

    def optimizer(self, kind, params, lr=1e-3):
        """The base class's functional SGD/Adam, with the new params and Adam's moments
        realised in one schedule, as ``tinygrad.nn.optim``'s ``step()`` realises params
        and state together. Realising the params alone left each moment a lazy graph
        that grew every step (15, 21, 27... nodes), recomputed from every past
        gradient, all kept alive."""
        from tinygrad import Tensor

        update = super().optimizer(kind, params, lr)

        def step(params, grads):
            new = update(params, grads)
            Tensor.realize(*new.values(), *update.state_arrays())
            return new

        step.state_arrays = update.state_arrays
        return step

    # ---- the breakdown's hooks (harness/measure/breakdown.py) ------------------------
    # Saved activations: none to count (split_vjp is None: the breakdown says there is
    # no end of forward). Nothing is saved before the one realize; the scheduler decides
    # then which values become buffers and which are recomputed inside kernels.

    def buffer_bytes(self, tree):
        """Keyed by the device buffer under a tensor's movement ops (a gradient may be a
        transposed view: rnn_fanout's W); a tensor with no buffer under it (not
        realised) counts its own bytes."""
        from harness.frameworks.base import leaves

        Ops = _ops_enum()
        found = {}
        for tensor in leaves(tree):
            base = _uop(tensor).base
            if base.op is Ops.BUFFER:
                buffer = base.buffer.base
                found[id(buffer)] = buffer.nbytes
            else:
                found[id(tensor)] = tensor.nbytes()
        return found

    # ---- CUDA: tinygrad's own count of its device buffers --------------------------
    def device_memory_probe(self, device):
        if device != "cuda":
            return None  # on the CPU the RSS figures are the measurement
        from tinygrad import Device

        return MemUsedProbe(Device.DEFAULT)


class MemUsedProbe:
    """The bytes tinygrad's buffers hold on one device, and their peak.

    tinygrad counts them itself: ``Buffer.allocate`` adds a buffer's ``nbytes`` to
    ``GlobalCounters.mem_used_per_device[device]`` and ``Buffer.deallocate`` takes them
    off (device.py; views and external pointers are not counted, and neither is what
    the LRU cache keeps after a free, which the memory pass turns off). It keeps no
    peak, so the counter's dict is replaced by one that notes the device's largest
    total on every update (`_PeakCounting`): exact, not polled. Every device's buffers
    are counted there (the CPU device's too), which is how this is tested without a GPU.
    What tinygrad allocates outside its buffers (the CUDA context, kernels' code) is
    not in it: NVML's figure has it.
    """

    peak_since_reset = True

    def __init__(self, device):
        from tinygrad.helpers import GlobalCounters

        self.device = device  # tinygrad's name: "CUDA", "CPU" ("CUDA:1" counts as "CUDA")
        counts = GlobalCounters.mem_used_per_device
        if not isinstance(counts, _PeakCounting):
            counts = GlobalCounters.mem_used_per_device = _PeakCounting(counts)
        counts.watch(self._mine)
        self.counts = counts

    def _mine(self, key):
        name = str(key)
        return name == self.device or name.startswith(self.device + ":")

    def current_bytes(self):
        return self.counts.watched_total()

    def reset(self):
        self.counts.peak = self.counts.watched_total()

    def peak_bytes(self):
        return self.counts.peak


class _PeakCounting(defaultdict):
    """``GlobalCounters.mem_used_per_device`` that remembers the largest total of the
    watched devices' counts since `peak` was last set."""

    def __init__(self, counts):
        super().__init__(int, counts)
        self.mine = lambda key: False
        self.peak = 0

    def watch(self, mine):
        self.mine = mine
        self.peak = self.watched_total()

    def watched_total(self):
        return sum(value for key, value in self.items() if self.mine(key))

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if self.mine(key):
            total = self.watched_total()
            if total > self.peak:
                self.peak = total


def _jitted(step, TinyJit):
    """TinyJit over flat tensor arguments (it tracks the tensors of its positional
    arguments), rebuilt into the step's dicts inside."""
    state = {}

    def flat_step(*tensors):
        params = dict(zip(state["params"], tensors[: len(state["params"])]))
        inputs = dict(zip(state["inputs"], tensors[len(state["params"]) :]))
        loss, grads = step(params, inputs)
        return loss, *grads.values()

    jit = TinyJit(flat_step)

    def run(params, inputs):
        state["params"], state["inputs"] = list(params), list(inputs)
        loss, *grads = jit(*params.values(), *inputs.values())
        return loss, dict(zip(state["params"], grads))

    run.jit = jit
    return run


def _jit_buffers(jit):
    """The allocated buffers a captured TinyJit keeps between calls (the captured
    program's written buffers: intermediates and outputs), each base once."""
    if jit.captured is None:
        return []
    if not hasattr(jit.captured, "_written_uops"):  # 0.10.3-0.12: a list of ExecItems
        return _jit_cache_buffers(jit.captured)
    from tinygrad.engine.jit import buffers

    found = {}
    for uop in jit.captured._written_uops:
        buffer = buffers.get(uop)
        for one in (getattr(buffer, "bufs", None) or ([buffer] if buffer is not None else [])):
            if one.is_allocated():
                found[id(one.base)] = one.base
    return list(found.values())


def _jit_cache_buffers(captured):
    """0.10.3-0.12: the buffers of the captured kernels (``CapturedJit.jit_cache``, the
    ExecItems as captured: a graph runner that replaces them, e.g. the CPU's HCQGraph,
    lists only the inputs) less their input slots (``input_replace``); what is left is
    the step's intermediates and outputs."""
    inputs = set(captured.input_replace)  # (item, slot) of every input buffer
    found = {}
    for j, item in enumerate(captured.jit_cache):
        for i, one in enumerate(item.bufs):
            if one is not None and (j, i) not in inputs and one.is_allocated():
                found[id(one.base)] = one.base
    return list(found.values())


def _jit_buffer_bytes(jit):
    return sum(b.nbytes for b in _jit_buffers(jit))


def _synchronize_before_free(allocator):
    """0.11: the CPU device runs kernels on a thread of its own, and its allocator frees a
    buffer at once (no ``_free``: the mmap goes with the Python object), while a queued
    kernel may still use it. With the cache on a freed buffer stays mapped in the cache;
    with it off the worker died of SIGSEGV inside ``CPUComputeQueue._exec`` (eager
    chained_dot, 3 of 4 runs). 0.12+'s ``HCQAllocator._free`` synchronizes the device
    first; this does the same for an allocator of a device that has a queue and no
    ``_free`` of its own. '' where nothing was changed (0.10.x run kernels on the calling
    thread; 0.12+)."""
    from tinygrad.device import Allocator

    dev = getattr(allocator, "dev", None)
    if type(allocator)._free is not Allocator._free or not hasattr(dev, "synchronize"):
        return ""

    def _free(opaque, options=None):
        dev.synchronize()  # the kernels queued before this free are done with it

    allocator._free = _free
    return (" (this release's allocator frees without waiting for queued kernels: each free now "
            "synchronizes the device first, as 0.12+'s HCQAllocator._free does)")


def _use_cuda_or_raise(Device, helpers):
    try:
        Device["CUDA"]
    except Exception as err:  # noqa: BLE001
        raise Unavailable(f"tinygrad cannot open its CUDA device here: {type(err).__name__}: {err}") from err
    _set_default_device(Device, helpers, "CUDA")


def _use_cpu(Device, helpers):
    # 0.10.0-0.10.1: the clang CPU device is CLANG (runtime/ops_clang.py); CPU from 0.10.2
    name = "CPU" if "CPU" in getattr(Device, "_devices", ("CPU",)) else "CLANG"
    _set_default_device(Device, helpers, name)
    if Device.DEFAULT != name:
        raise Unavailable(f"tinygrad's default device is {Device.DEFAULT!r}, not {name!r}")


def _set_default_device(Device, helpers, name):
    if hasattr(helpers, "DEV"):
        helpers.DEV.value = name
    else:  # 0.10.3-0.12: no DEV; Device.DEFAULT is a cached_property users assign
        Device.DEFAULT = name


# ---- what older releases name otherwise (0.14 is the first branch of each) ---------------
def _set_cpu_threads(helpers, count):
    """The CPU device's kernel threads, and the settings that say what was set."""
    if hasattr(helpers, "NUM_CPU_THREADS"):
        helpers.NUM_CPU_THREADS.value = count
        return {"tinygrad NUM_CPU_THREADS": helpers.NUM_CPU_THREADS.value}
    if hasattr(helpers, "CPU_COUNT"):  # 0.12-0.13: CPU_COUNT, read by the C renderer's class
        # body (global_max) when it is imported, i.e. when the CPU device first opens
        if "tinygrad.renderer.cstyle" in sys.modules:
            raise Unavailable("tinygrad's C renderer was imported before CPU_COUNT could be set "
                              "(its kernel thread count is fixed at import)")
        helpers.CPU_COUNT.value = count
        return {"tinygrad CPU_COUNT": helpers.CPU_COUNT.value}
    # 0.10.x-0.11: the CPU device runs each kernel on one thread, with no setting
    return {"tinygrad kernel threads": "1 (this release's CPU device has no thread setting)"}


@functools.lru_cache(maxsize=None)  # the allocator's source does not change in a process
def _buffer_page_kind():
    """The page kind RSS files the CPU device's buffers under: 0.12+'s CPUAllocator maps
    MAP_ANON | MAP_SHARED (shmem pages); 0.11's maps MAP_ANON | MAP_PRIVATE and 0.10.x
    allocates with ctypes (MallocAllocator): anonymous pages."""
    import inspect

    try:
        from tinygrad.runtime import ops_cpu

        source = inspect.getsource(ops_cpu.CPUAllocator)
    except (ImportError, AttributeError, OSError, TypeError):
        return "anon"
    return "shmem" if "MAP_SHARED" in source else "anon"


def _ops_enum():
    try:
        from tinygrad.uop.ops import Ops
    except ImportError:  # 0.10.x: tinygrad.ops
        from tinygrad.ops import Ops
    return Ops


def _uop(tensor):
    # 0.10.x: Tensor.lazydata (renamed Tensor.uop in 0.11)
    return tensor.uop if hasattr(tensor, "uop") else tensor.lazydata



# ---- the op set -------------------------------------------------------------------------
def _make_ops():
    from tinygrad import Tensor

    def take(x, indices, axis=0):
        axis = axis % x.ndim
        return x[(slice(None),) * axis + (indices,)]

    def where(cond, x, y):
        return cond.where(x, y)

    return types.SimpleNamespace(
        add=lambda x, y: x + y,
        sub=lambda x, y: x - y,
        mul=lambda x, y: x * y,
        div=lambda x, y: x / y,
        neg=lambda x: -x,
        exp=Tensor.exp,
        log=Tensor.log,
        sqrt=Tensor.sqrt,
        tanh=Tensor.tanh,
        sigmoid=Tensor.sigmoid,
        relu=Tensor.relu,
        sin=lambda x: x.sin().contiguous(),  # computed once (module docstring: sin/cos)
        cos=lambda x: x.cos().contiguous(),
        matmul=Tensor.matmul,
        sum=lambda x, axis=None, keepdims=False: x.sum(axis=axis, keepdim=keepdims),
        mean=lambda x, axis=None, keepdims=False: x.mean(axis=axis, keepdim=keepdims),
        max=lambda x, axis=None, keepdims=False: x.max(axis=axis, keepdim=keepdims),
        reshape=lambda x, shape: x.reshape(tuple(shape)),
        permute_dims=lambda x, axes: x.permute(tuple(axes)),
        concat=lambda xs, axis=0: Tensor.cat(*xs, dim=axis),
        stack=lambda xs, axis=0: Tensor.stack(*xs, dim=axis),
        getitem=lambda x, key: x[key],
        take=take,
        where=where,
        softmax=lambda x, axis=-1: x.softmax(axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: x.logsumexp(axis=axis, keepdim=keepdims),
        conv2d=lambda x, w, stride=1, padding=0: x.conv2d(w, stride=stride, padding=padding),
        max_pool2d=lambda x, size=2: x.max_pool2d((size, size), stride=size),
        upsample2d=lambda x, scale=2: x.interpolate((x.shape[2] * scale, x.shape[3] * scale), mode="nearest"),
        cumsum=lambda x, axis: x.cumsum(axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )
