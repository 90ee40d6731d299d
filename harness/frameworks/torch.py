"""PyTorch: the op set on torch's own functions; eager and ``torch.compile``.

Every op is the function a PyTorch user calls: ``torch.matmul``,
``torch.nn.functional.conv2d`` / ``max_pool2d`` / ``interpolate(mode="nearest")`` /
``embedding``, ``torch.logsumexp``, ``torch.cumsum``... Binary elementwise ops are
the Python operators (``x + y`` is ``torch.add``), because ``torch.add(2.0, x)``
rejects a Python number on the left; a Python number never changes a tensor's dtype.

Modes:

- ``"eager"``: the loss runs op by op; ``torch.autograd.grad`` walks the graph autograd
  recorded (what ``loss.backward()`` does, without touching ``.grad``).
- ``"compiled"``: ``torch.compile(loss, dynamic=False)`` (TorchDynamo + Inductor, C++
  kernels built with g++ on CPU); AOTAutograd compiles the backward too, and
  ``torch.autograd.grad`` runs it. This is how PyTorch users compile training: the model
  is compiled, the backward follows. ``dynamic=False`` specialises on shapes (one cell
  = one shape; no dynamic-shape recompile). Compilation happens on the first call and
  costs seconds even for tiny graphs, several times more with an empty Inductor cache
  than with a warm one (docs/design.md, Evidence: "Compile caches").
  Inductor's on-disk cache is by default /tmp/torchinductor_$USER, shared by every
  process of the user: a process that finds its graphs there compiled by an earlier one
  keeps a fraction of what a cold compile leaves resident (seq2seq_attention small,
  torch 2.15.0: retained 24.4 against 109.9 MiB). So each compiled worker process gets
  an empty cache of its own (``own_compile_cache_modes``; TORCHINDUCTOR_CACHE_DIR, and
  TRITON_CACHE_DIR inside it, set before Inductor first reads them): every compiled
  figure is a cold compile's, and the record's ``settings.inductor_cache`` says so.

``split_vjp`` (both modes): forward = the loss with ``requires_grad`` leaves (autograd
keeps what the backward needs on the graph), backward = ``torch.autograd.grad``, which
frees the graph's saved tensors as it goes.

``optimizer``: the native ``torch.optim.SGD`` / ``torch.optim.Adam`` (what PyTorch
users run); it updates the params given to ``optimizer()`` in place and returns them.

Remat (``load(..., remat=)``): each ``checkpoint`` segment and each of the
ceil(sqrt(n)) segments of a ``chain`` (checkpoint_sequential's cut) goes through
``torch.utils.checkpoint.checkpoint``:

- ``"native"``: ``use_reentrant=False`` (saved-tensor hooks; dict arguments are fine);
- ``"native:reentrant"``: ``use_reentrant=True``, the autograd.Function version. It
  sees only top-level tensor arguments, so a segment's dicts are passed flattened
  (remat.flat_checkpoint); and it refuses ``torch.autograd.grad`` ("Checkpointing is
  not compatible with .grad()"), so with this remat the gradient step calls
  ``loss.backward()`` on fresh leaves and reads their ``.grad`` (the leaves are new
  tensors every step, so nothing accumulates across steps).

Both work under ``torch.compile`` (checked with torch 2.13: one graph, no graph
break): Dynamo turns every ``checkpoint`` call into the ``tag_activation_checkpoint``
higher-order op, ``use_reentrant`` becoming a mere keyword of it, and AOTAutograd's
partitioner recomputes the tagged ops in the compiled backward. So compiled,
"native:reentrant" runs the same graph as "native" (only the gradient call differs).
"""

import itertools
import os
import shutil
import types

from harness.choices import OPTIMIZERS, check_choice
from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import COMPILE_CACHE_ENV, Adapter, NoPrediction, Unavailable


class TorchAdapter(Adapter):
    name = "torch"
    module = "torch"
    distributions = ("torch",)
    index_must_be_named = (
        "from PyPI a torch release is a CUDA build of several GB; pass --torch-index "
        "https://download.pytorch.org/whl/cpu for its CPU build (~0.2 GB, against ~2.7 GB from PyPI) "
        "or --torch-index pypi to accept the CUDA download (docs/versions.md)"
    )
    modes = ("eager", "compiled")
    compiled_as = "torch.compile(loss, dynamic=False): Inductor (C++ on CPU), AOTAutograd backward"
    eager_as = "torch autograd: the loss computed op by op, then torch.autograd.grad"
    remats = ("none", "native", "native:reentrant")
    own_compile_cache_modes = ("compiled",)
    # torch reads no allocator setting at start-up on CPU. On CUDA the caching
    # allocator's defaults are what users run (PYTORCH_CUDA_ALLOC_CONF left unset).
    environment = {}

    def __init__(self):
        self.device = "cpu"
        self.remat = "none"

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        remat = remat_lib.format_remat(*self.check_remat(remat))
        import torch

        _check_numpy_abi(torch)
        self._settings = _fix_threads(torch)
        # MKL's fast memory manager keeps the buffers of its BLAS calls between steps
        # (~1 MiB on rnn_fanout small, ~6 MiB on seq2seq): part of retained_bytes (anon)
        # unless MKL_DISABLE_FAST_MM=1, what torch users run by default.
        self._settings["MKL_DISABLE_FAST_MM"] = os.environ.get("MKL_DISABLE_FAST_MM", "unset (MKL keeps its buffers)")
        if device == "cuda":
            self.cuda_device()
            self._settings.update(_cuda_settings(torch))
        if mode == "compiled":
            if not hasattr(torch, "compile"):
                raise Unavailable(f"torch {torch.__version__} has no torch.compile (first released in PyTorch 2.0)")
            cache = _point_inductor_cache()  # before anything of Inductor is imported
            _check_dynamo_supported(torch)
            self._settings["inductor_cache"] = _checked_inductor_cache(cache)
            import torch._inductor.config as inductor_config

            cxx = inductor_config.cpp.cxx[-1] if device == "cpu" else None
            if cxx and shutil.which(cxx) is None:
                raise Unavailable(f"torch.compile on CPU needs the C++ compiler {cxx!r}, which is not on PATH")
            import torch._dynamo.config as dynamo_config

            # Never measure eager under the name "compiled": past the recompile limit
            # Dynamo silently runs the Python function eagerly; make that an error.
            if hasattr(dynamo_config, "fail_on_recompile_limit_hit"):
                dynamo_config.fail_on_recompile_limit_hit = True
                self._settings["torch.compile"] = "dynamic=False, backend=inductor, fail_on_recompile_limit_hit"
            else:  # before 2.6 the option does not exist; every cell compiles a code object of its own
                self._settings["torch.compile"] = "dynamic=False, backend=inductor (no fail_on_recompile_limit_hit)"
        self.device = device
        self.remat = remat
        self.ops = _make_ops(torch)
        if remat != "none":
            checkpoint = _native_checkpoint(torch, reentrant=remat == "native:reentrant")
            self.ops.checkpoint, self.ops.chain = checkpoint, remat_lib.chain_of(checkpoint)
        self._settings["remat"] = remat + {
            "none": "",
            "native": " (torch.utils.checkpoint, use_reentrant=False)",
            "native:reentrant": " (torch.utils.checkpoint, use_reentrant=True; grads by loss.backward())",
        }[remat]
        return self

    def cuda_device(self):
        import torch

        reason = _cuda_unavailable_reason(torch)
        if reason:
            raise Unavailable(reason)
        return torch.device("cuda")

    def from_numpy(self, tree, device="cpu"):
        import numpy as np
        import torch

        # A copy: torch.optim updates params in place, and must not write into the
        # caller's NumPy arrays.
        return {k: torch.from_numpy(np.array(v, copy=True)).to(device) for k, v in tree.items()}

    def to_numpy(self, tree):
        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        return tree.detach().cpu().numpy()  # .cpu() waits for the device

    def sync(self, tree):
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
        return tree

    def _loss_callable(self, loss_fn, mode):
        self.check_mode(mode)
        ops = self.ops

        def loss(params, inputs):
            return loss_fn(ops, params, inputs)

        if mode == "compiled":
            import torch

            return torch.compile(_own_code_object(loss), dynamic=False)
        return loss

    def value_and_grad(self, loss_fn, mode="eager"):
        import torch

        loss_of = self._loss_callable(loss_fn, mode)

        def step(params, inputs):
            with torch.enable_grad():
                leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
                loss = loss_of(leaves, inputs)
                grads = self._gradients(loss, leaves)
            return loss.detach(), grads

        return step

    def _gradients(self, loss, leaves):
        """{name: d loss / d leaf}: torch.autograd.grad, except under the reentrant
        checkpoint, which refuses it: there loss.backward() fills the fresh leaves'
        .grad (a param the loss does not reach gets zeros)."""
        import torch

        if self.remat != "native:reentrant":
            return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
        loss.backward()
        return {k: (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in leaves.items()}

    def split_vjp(self, loss_fn, mode="eager"):
        import torch

        loss_of = self._loss_callable(loss_fn, mode)

        def forward(params, inputs):
            with torch.enable_grad():
                leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
                return (loss_of(leaves, inputs), leaves)

        def backward(state):
            loss, leaves = state
            return self._gradients(loss, leaves)

        return forward, backward

    def loss_of(self, state):
        return state[0].detach()

    # ---- the framework's own prediction (harness/measure/prediction.py) ----------------
    def predict_step_memory(self, loss_fn, params, inputs, mode):
        """MemTracker (torch.distributed._tools.mem_tracker) over the cell's own step
        under FakeTensorMode: every tensor is shape-only, so nothing is computed."""
        import torch._dynamo.utils as dynamo_utils
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker

        step = self.value_and_grad(loss_fn, mode)
        frames_before = sum(dynamo_utils.counters["frames"].values())
        with FakeTensorMode() as fake:
            fake_params = {k: fake.from_tensor(v) for k, v in params.items()}
            fake_inputs = {k: fake.from_tensor(v) for k, v in inputs.items()}
            tracker = MemTracker()
            tracker.track_external(*fake_params.values(), *fake_inputs.values())
            with tracker:
                result = step(fake_params, fake_inputs)
                del result
            snapshot = tracker.get_tracker_snapshot("peak")
        if mode == "compiled" and sum(dynamo_utils.counters["frames"].values()) == frames_before:
            # measured (torch 2.13): under MemTracker's dispatch mode dynamo skips the
            # frame, so the tracker saw the eager program, not the compiled one
            raise NoPrediction(
                "under MemTracker's FakeTensorMode torch.compile compiled and ran no frame "
                "(dynamo's frame counters did not move): its figure would be the eager program's"
            )
        per_device = {str(device): {getattr(k, "value", str(k)): int(v) for k, v in found.items()}
                      for device, found in snapshot.items()}
        peak = sum(found.get("Total", 0) for found in per_device.values())
        # the params and inputs are resident before the step (MemTracker files them
        # under "Other"); the step peak counts only what the step adds above them
        resident = sum(self.buffer_bytes([params, inputs]).values())
        return {
            "method": "torch.distributed._tools.mem_tracker.MemTracker over the step under FakeTensorMode, "
            "peak snapshot",
            "bytes": peak - resident,
            "compares_with": "the peak snapshot's Total less the params' and inputs' bytes (resident "
            "before the step), as the step peak counts",
            "program": self.compiled_as if mode == "compiled" else self.eager_as,
            "same_program": True,
            "fields": {"peak": per_device, "resident_params_inputs": resident},
            "categories": {k: v for found in per_device.values() for k, v in found.items() if k != "Total"},
        }

    def optimizer(self, kind, params, lr=1e-3):
        import torch

        check_choice("optimizer", kind, OPTIMIZERS)
        names = list(params)
        tensors = [params[k] for k in names]
        native = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[kind](tensors, lr=lr)

        def update(params, grads):
            for name, tensor in zip(names, tensors):
                tensor.grad = grads[name]
            native.step()
            native.zero_grad(set_to_none=True)  # drop the grads, as a training loop does
            return dict(zip(names, tensors))

        # what the optimizer keeps between steps: Adam's exp_avg, exp_avg_sq and step
        update.state_arrays = lambda: [v for s in native.state.values() for v in s.values() if torch.is_tensor(v)]
        return update

    # ---- the breakdown's hooks ---------------------------------------------------------
    def saving(self):
        """torch.autograd.graph.saved_tensors_hooks around the forward: the pack hook
        sees every tensor autograd saves for the backward and keeps a weak reference
        (the tensor itself is what is saved, so nothing changes for the backward)."""
        import torch

        from harness.frameworks.base import SavedTensorRefs

        self._saved = SavedTensorRefs()
        return torch.autograd.graph.saved_tensors_hooks(self._saved.pack, self._saved.unpack)

    def saved_activation_bytes(self, state, params, inputs):
        if getattr(self, "_saved", None) is None:
            return None, "no forward pass ran under saving()"
        method = ("torch.autograd.graph.saved_tensors_hooks: the tensors autograd saved that are "
                  "still alive at the end of forward, counted once per storage, params and inputs excluded")
        return self._saved.bytes(self, params, inputs), method

    def saved_by_op(self, state, params, inputs):
        """The saved tensors of `saving()`, each buffer named by the autograd node that
        made it (its base's ``grad_fn``: MmBackward0 for a matmul's output)."""
        if getattr(self, "_saved", None) is None:
            return None, "no forward pass ran under saving()"

        def producer(tensor):
            base = tensor._base if tensor._base is not None else tensor
            return type(base.grad_fn).__name__ if base.grad_fn is not None else "no autograd node"

        method = ("torch.autograd.graph.saved_tensors_hooks: each saved storage alive at the end of forward, "
                  "once, under the autograd node that made it (the grad_fn of the tensor or of its view's base); "
                  "read_by: the nodes whose _saved_* tensors hold it (a walk of the graph from the loss)")
        readers = self._readers(state[0])
        return [(key, nbytes, name, sorted(readers.get(key, ())))
                for key, nbytes, name in self._saved.by_producer(self, params, inputs, producer)], method

    def _readers(self, loss):
        """{storage key: {node names}}: which autograd nodes save each storage, from a walk
        of the graph (each node's ``_saved_*`` tensors) from the loss's grad_fn."""
        import torch

        readers, seen, stack = {}, set(), [loss.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            for attr in dir(node):
                if not attr.startswith("_saved_"):
                    continue
                try:
                    value = getattr(node, attr)
                except RuntimeError:  # freed, or not a tensor
                    continue
                for tensor in value if isinstance(value, (tuple, list)) else (value,):
                    if torch.is_tensor(tensor):
                        for key in self.buffer_bytes(tensor):
                            readers.setdefault(key, set()).add(type(node).__name__)
            stack.extend(parent for parent, _ in node.next_functions)
        return readers

    def buffer_bytes(self, tree):
        from harness.frameworks.base import leaves

        found = {}
        for tensor in leaves(tree):
            storage = _untyped_storage(tensor)
            # A storage with no memory in this process holds no bytes to count: torch 2.1's
            # compiled step leaves tracing-time tensors among those saved for backward, whose
            # storage raises "invalid python storage"; a FakeTensor's reads 0 (with a warning).
            try:
                pointer = storage.data_ptr()
            except RuntimeError:
                continue
            if pointer:
                found[(storage.device.type, pointer)] = storage.nbytes()
        return found

    # ---- CUDA: everything device-specific for torch is below -------------------------
    def set_matmul_precision(self, device, precision):
        if device == "cpu":
            return super().set_matmul_precision(device, precision)
        import torch

        tf32 = precision == "tf32"
        # torch's default allows TF32 in cuDNN convolutions but not in matmuls: both set
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        return (f"torch.backends.cuda.matmul.allow_tf32={tf32}, torch.backends.cudnn.allow_tf32={tf32}")

    def device_memory_probe(self, device):
        if device != "cuda":
            return None
        import torch

        return TorchCudaProbe(torch)


class TorchCudaProbe:
    """torch's caching allocator on the current CUDA device. All figures are absolute
    bytes; ``baseline_bytes`` is ``memory_allocated()`` at ``reset()``, and the peaks
    count from ``reset()`` (``reset_peak_memory_stats``). ``*_bytes`` are the tensor
    blocks handed out (rounded sizes); ``*reserved*`` the segments held from cudaMalloc.
    Every read synchronises first so stream-ordered frees have happened."""

    peak_since_reset = True
    method = "torch.cuda.max_memory_allocated after reset_peak_memory_stats"

    def __init__(self, torch):
        self.torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.baseline_bytes = 0

    def _sync(self):
        self.torch.cuda.synchronize(self.device)

    def reset(self):
        self._sync()
        self.torch.cuda.reset_peak_memory_stats(self.device)
        self.baseline_bytes = self.torch.cuda.memory_allocated(self.device)

    def current_bytes(self):
        self._sync()
        return self.torch.cuda.memory_allocated(self.device)

    def peak_bytes(self):
        self._sync()
        return self.torch.cuda.max_memory_allocated(self.device)

    def reserved_bytes(self):
        self._sync()
        return self.torch.cuda.memory_reserved(self.device)

    def peak_reserved_bytes(self):
        self._sync()
        return self.torch.cuda.max_memory_reserved(self.device)


def _cuda_unavailable_reason(torch):
    """"" when torch can use a CUDA GPU here, else why not."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (install a CUDA build of torch for cuda)"
    if not torch.cuda.is_available():
        return "torch is a CUDA build, but no CUDA GPU is visible (torch.cuda.is_available() is False)"
    return ""


def _cuda_settings(torch):
    """The CUDA build and device a cuda cell ran on, for the record's provenance (a GPU
    host's torch is its own build: '2.11.0+cu130' says less than these)."""
    return {
        "torch.version.cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(torch.cuda.current_device()),
    }


def _own_code_object(fn):
    """`fn` with a code object of its own.

    TorchDynamo keeps its compiled graphs on the *code object* it intercepts. Every
    step this adapter makes runs the same closure code (and a partial goes through
    one shared Dynamo wrapper), so one process compiling several workloads or dtypes
    (`python -m harness check`) recompiled that one code object per workload and dtype
    and, past recompile_limit (8), ran the rest eagerly while calling it "compiled".
    A copy of the code object per step gives each step its own cache; load() also
    makes hitting the limit an error instead of a silent eager fallback."""
    name = f"{fn.__name__}_{next(_compiled_steps)}"
    return types.FunctionType(_renamed(fn.__code__, name), fn.__globals__, name, fn.__defaults__, fn.__closure__)


def _renamed(code, name):
    """`code` named `name`; a code object has a qualified name from Python 3.11 only
    (torch 2.0's torch.compile runs on 3.10, in the Python 3.10 release store)."""
    if hasattr(code, "co_qualname"):
        return code.replace(co_name=name, co_qualname=name)
    return code.replace(co_name=name)


_compiled_steps = itertools.count()


def _untyped_storage(tensor):
    """The tensor's bytes: Tensor.untyped_storage() from torch 2.0; before, storage() is
    a typed view over them (1.13: .untyped(), 1.12: ._untyped())."""
    if hasattr(tensor, "untyped_storage"):
        return tensor.untyped_storage()
    typed = tensor.storage()
    return typed.untyped() if hasattr(typed, "untyped") else typed._untyped()


def _point_inductor_cache():
    """Point Inductor's (and Triton's) on-disk cache at the directory the worker made
    for this process (GRADMEM_COMPILE_CACHE_DIR, empty); None outside a worker, where
    Inductor keeps its default."""
    path = os.environ.get(COMPILE_CACHE_ENV)
    if path:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
        # Triton (CUDA kernels) caches in ~/.triton/cache unless told; newer Inductors
        # put it under their own cache, older ones do not
        os.environ["TRITON_CACHE_DIR"] = os.path.join(path, "triton")
    return path


def _checked_inductor_cache(path):
    """The record's account of Inductor's cache; raises where Inductor reads another
    directory than `path` (it read the variable before load(): a measured cell would
    then find what earlier processes compiled)."""
    used = _inductor_cache_dir()
    if path is None:
        return {"dir": used, "state": "Inductor's default, shared by the user's processes (not a worker)"}
    if used is not None and os.path.realpath(used) != os.path.realpath(path):
        raise RuntimeError(f"Inductor caches in {used}, not in this process's own empty cache {path} "
                           "(TORCHINDUCTOR_CACHE_DIR was read before load())")
    entries = len(os.listdir(path)) if os.path.isdir(path) else 0
    return {"dir": path, "entries_at_load": entries,
            "state": "this process's own, empty at start, removed when it ends"
                     + ("" if used else " (Inductor's cache_dir() not found to check)")}


def _inductor_cache_dir():
    """Inductor's own answer to where it caches (its function moved between releases),
    or None where none of them exists."""
    import importlib

    for module in ("torch._inductor.runtime.cache_dir_utils", "torch._inductor.runtime.runtime_utils",
                   "torch._inductor.utils"):
        try:
            cache_dir = getattr(importlib.import_module(module), "cache_dir")
        except (ImportError, AttributeError):
            continue
        return cache_dir()
    return None


def _check_dynamo_supported(torch):
    """torch.compile refuses some Pythons at the first call (2.0: "Python 3.11+ not yet
    supported"): an Unavailable cell with torch's reason, not an error in every cell."""
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported
    except ImportError:
        return
    try:
        check_if_dynamo_supported()
    except RuntimeError as err:
        raise Unavailable(f"torch {torch.__version__}: torch.compile does not run on this Python: {err}") from None


def _check_numpy_abi(torch):
    """A torch built against NumPy 1.x (every release before 2.3) imports under NumPy 2
    with only a printed warning, then fails at the first torch.from_numpy. Raise at
    load, naming NumPy, so that such a release is built again with an older NumPy
    (harness/versions/era.py) instead of recording an error in every cell."""
    import numpy

    try:
        torch.from_numpy(numpy.zeros(1, dtype=numpy.float32))
    except RuntimeError as err:
        raise Unavailable(f"torch {torch.__version__} cannot exchange arrays with NumPy {numpy.__version__} "
                          f"(built against another NumPy ABI): {err}") from None


# ---- threads ----------------------------------------------------------------------------
def _fix_threads(torch):
    """torch's intra-op pool (set_num_threads) and inter-op pool to GRADMEM_THREADS."""
    count = threads.thread_count()
    torch.set_num_threads(count)
    try:
        torch.set_num_interop_threads(count)
    except RuntimeError:
        # Only settable before the first inter-op work; a second load() in the same
        # process (tests) finds it set already, and records what it is.
        pass
    return {
        "threads": count,
        "torch.get_num_threads": torch.get_num_threads(),
        "torch.get_num_interop_threads": torch.get_num_interop_threads(),
    }


# ---- the op set -------------------------------------------------------------------------
def _all_axes(x, axis):
    """torch reduces over `dim`; the contract's None means every axis."""
    return tuple(range(x.ndim)) if axis is None else axis


def _native_checkpoint(torch, reentrant):
    """checkpoint(f, *xs) through torch.utils.checkpoint.checkpoint. The reentrant one
    tracks only top-level tensor arguments: dicts are flattened for it."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    if reentrant:
        return remat_lib.flat_checkpoint(lambda g, *flat: torch_checkpoint(g, *flat, use_reentrant=True))
    return lambda f, *xs: torch_checkpoint(f, *xs, use_reentrant=False)


def _make_ops(torch):
    F = torch.nn.functional

    def take(x, indices, axis=0):
        axis = axis % x.ndim
        if axis == 0 and x.ndim == 2:
            return F.embedding(indices, x)  # nn.Embedding's op: what embedding users run
        flat = torch.index_select(x, axis, indices.reshape(-1))
        return flat.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1 :])

    return types.SimpleNamespace(
        add=lambda x, y: x + y,
        sub=lambda x, y: x - y,
        mul=lambda x, y: x * y,
        div=lambda x, y: x / y,
        neg=torch.neg,
        exp=torch.exp,
        log=torch.log,
        sqrt=torch.sqrt,
        tanh=torch.tanh,
        sigmoid=torch.sigmoid,
        relu=torch.relu,
        sin=torch.sin,
        cos=torch.cos,
        matmul=torch.matmul,
        sum=lambda x, axis=None, keepdims=False: torch.sum(x, dim=_all_axes(x, axis), keepdim=keepdims),
        mean=lambda x, axis=None, keepdims=False: torch.mean(x, dim=_all_axes(x, axis), keepdim=keepdims),
        # amax, not max(dim): the gradient is shared among ties, as in NumPy-based engines
        max=lambda x, axis=None, keepdims=False: torch.amax(x, dim=_all_axes(x, axis), keepdim=keepdims),
        reshape=lambda x, shape: torch.reshape(x, tuple(shape)),
        permute_dims=lambda x, axes: torch.permute(x, tuple(axes)),
        concat=lambda xs, axis=0: torch.cat(list(xs), dim=axis),
        stack=lambda xs, axis=0: torch.stack(list(xs), dim=axis),
        getitem=lambda x, key: x[key],
        take=take,
        where=torch.where,
        softmax=lambda x, axis=-1: torch.softmax(x, dim=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: torch.logsumexp(x, dim=_all_axes(x, axis), keepdim=keepdims),
        conv2d=lambda x, w, stride=1, padding=0: F.conv2d(x, w, stride=stride, padding=padding),
        max_pool2d=lambda x, size=2: F.max_pool2d(x, kernel_size=size, stride=size),
        upsample2d=lambda x, scale=2: F.interpolate(x, scale_factor=scale, mode="nearest"),
        cumsum=lambda x, axis: torch.cumsum(x, dim=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )
