"""What every framework adapter provides.

An adapter is a subclass of `Adapter` in its own module (`harness/frameworks/torch.py`
...). Two halves, kept apart on purpose:

- *Cheap* attributes and `available()` only look at installed package metadata; the
  parent process of a sweep calls them and must never import a framework (imports weigh
  hundreds of MiB and allocators keep what they took).
- Everything else runs inside a worker (or a test) after `load(device, mode, remat)`
  has imported the framework and configured it.

``remat`` (harness/frameworks/remat.py) picks how the op set's ``checkpoint`` and
``chain`` segments are run: "none" (plain call and loop, every adapter) or a strategy
in the adapter's ``remats``; anything else is Unavailable, naming what it offers.

The gradient is always taken with respect to ``params`` (a flat ``dict[str, array]``);
``inputs`` (a flat dict too, possibly with integer or boolean arrays) are data.
"""

import contextlib
import importlib.metadata
import importlib.util

from harness.choices import DEVICES, MODES, ChoiceError, check_choice
from harness.frameworks import remat as remat_lib

#: the variable naming the directory a process's compile cache goes in: the worker sets
#: it (harness/measure/worker.py), an adapter's load() points its framework there
COMPILE_CACHE_ENV = "GRADMEM_COMPILE_CACHE_DIR"


class Unavailable(RuntimeError):
    """The framework, mode or device cannot run here; the message says why."""


class NoPrediction(RuntimeError):
    """The framework has no memory predictor for this cell; the message says why."""


def nvidia_device_nodes():
    """True when the NVIDIA driver exposes a GPU (checked without importing a framework)."""
    import glob

    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*"))


class Adapter:
    #: registry key, e.g. "torch"
    name = ""
    #: importable module that must exist, e.g. "torch"
    module = ""
    #: modules a zygote imports before it forks this framework's workers
    #: (harness/sweep/zygote.py): imports only, nothing that starts a thread or a
    #: device; None means (module,), () that workers are always spawned
    preload = None
    #: distribution names whose versions go into the result's provenance
    distributions = ()
    #: modes this adapter implements, a subset of harness.choices.MODES
    modes = ("eager",)
    #: dtypes this adapter computes correctly; a cell in another is unavailable, with
    #: `dtype_note` as the reason (MLX's CPU float64 is partial)
    dtypes = ("float64", "float32")
    dtype_note = ""
    #: what "compiled" means here, for the docs and `list` (e.g. "jax.jit")
    compiled_as = ""
    #: what "eager" runs, for the record's `step_program` (`step_program()`)
    eager_as = "the framework's own autodiff, each op run as it is called"
    #: remat strategies load() accepts, spelled as on the command line ("native",
    #: "native:reentrant"); "none" is the plain op set
    remats = ("none",)
    #: environment variables the worker process must have before it starts (allocator
    #: settings some frameworks read only at start-up); the worker adds them to its env
    environment = {}

    #: True when pip alone installs a commit of the framework's repository, in minutes:
    #: pure Python (HIPS autograd, tinygrad) or one small extension pip builds itself
    #: (PyTensor's Cython scan). `bisect --repo` then needs no `--build-hook`, and the
    #: release report offers a stage-2 command; a framework built by its own toolchain
    #: (torch, jaxlib, TensorFlow, Paddle) needs `--build-hook CMD`
    installs_from_source = False

    #: why a pinned release is installed only from an index the user names
    #: (``--torch-index``), with what to pass; "" where the package index's wheels serve
    index_must_be_named = ""

    #: True where the framework's arrays are NumPy buffers, which tracemalloc sees (NumPy
    #: reports its data allocations to it): the memory pass then takes the tracemalloc
    #: peak of one more step; elsewhere (torch, JAX, TF ...) it would read zero
    arrays_are_numpy = False

    #: {era label (harness/versions/era.py LADDER): requirements} that a release built
    #: with that era's older NumPy needs besides its pins (2017's autograd: `future`)
    era_requires = {}

    #: modes whose every worker process gets an empty on-disk compile cache of its own
    #: (harness/measure/worker.py: a new directory in GRADMEM_COMPILE_CACHE_DIR, removed
    #: when the process ends), where the framework's default cache is shared by all of
    #: the user's processes: whether an earlier process compiled the same graph would
    #: otherwise decide a compiled cell's retained and first-step figures (torch's Inductor)
    own_compile_cache_modes = ()

    #: what the adapter itself needs beside the framework (autograd.scipy needs SciPy);
    #: a pinned version's environment installs them at the versions installed here
    adapter_requires = ()

    @property
    def package(self):
        """The distribution a pinned version (``--framework NAME==VERSION``) installs
        and whose version is the record's ``framework_version``; None where no version
        can be pinned. Default: the first of `distributions`."""
        return self.distributions[0] if self.distributions else None

    def pinned_requirement(self, version):
        """What a pinned version's environment installs (harness/versions/envs.py):
        ``package==version`` by default; an adapter whose package needs an extra for
        its backend (MLX on Linux: ``mlx[cpu]``) says so here."""
        return f"{self.package}=={version}"

    # ---- cheap: safe in the parent ------------------------------------------------
    def available(self):
        """(True, "") when the framework is installed, else (False, reason)."""
        if importlib.util.find_spec(self.module) is None:
            extra = self.name
            return False, f"{self.module} is not installed (pip install 'gradmem[{extra}]')"
        return True, ""

    def versions(self):
        """{distribution: version} of what this adapter runs on (no import)."""
        found = {}
        for dist in self.distributions:
            try:
                found[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
        return found

    def check_device(self, device):
        """`device` if it is one of DEVICES (whether it can run here is load()'s
        business: Unavailable), else a ChoiceError naming them."""
        return check_choice(f"{self.name} device", device, DEVICES)

    def check_mode(self, mode):
        """`mode` if this adapter has it, else a ChoiceError naming its modes."""
        if mode in MODES and mode not in self.modes:  # a mode of others, not of this one
            raise ChoiceError(f"{self.name} has no {mode!r} mode; valid {self.name} modes: {', '.join(self.modes)}")
        return check_choice(f"{self.name} mode", mode, self.modes)

    def check_dtype(self, dtype):
        """Unavailable (naming the dtypes it has, and why) when `dtype` is not in `dtypes`."""
        if dtype not in self.dtypes:
            raise Unavailable(self.dtype_reason(dtype))
        return dtype

    def dtype_reason(self, dtype):
        why = f": {self.dtype_note}" if self.dtype_note else ""
        return f"{self.name} has no {dtype} here (its dtypes: {', '.join(self.dtypes)}){why}"

    def check_remat(self, remat):
        """The parsed (strategy, arg) of `remat` if this adapter offers it.

        Malformed text is a ChoiceError naming every strategy's spelling; a well-formed
        strategy this adapter lacks (sqrt on torch) is Unavailable naming its offers,
        so a sweep records the cell as unavailable rather than failed.
        """
        parsed = remat_lib.parse_remat(remat)
        if not remat_lib.offers(self.remats, remat):
            raise Unavailable(
                f"{self.name} does not offer remat {remat!r}; {self.name} offers: {', '.join(self.remats)}"
            )
        return parsed

    # ---- in the worker: after load() ------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        """Import and configure the framework for `device`, `mode` and `remat`.

        Raises Unavailable (with the reason) when the device, mode or remat cannot run
        here, e.g. "cuda" without a GPU, or a remat not in `remats` (`check_remat`).
        Sets `self.ops` to the op-set namespace, whose ``checkpoint`` and ``chain``
        follow the remat strategy.
        """
        raise NotImplementedError

    def devices(self):
        """Devices this framework can use here: ["cpu"], plus "cuda" where the NVIDIA
        driver exposes a GPU (looked for first, without importing anything) and
        `cuda_device()` finds it usable."""
        found = ["cpu"]
        if nvidia_device_nodes():
            try:
                self.cuda_device()
                found.append("cuda")
            except Unavailable:
                pass
        return found

    def cuda_device(self):
        """The framework's CUDA device (importing the framework), or Unavailable saying
        why it cannot use one here: the one check `load(device="cuda")` and `devices()`
        share. Default: the adapter has no CUDA support."""
        raise Unavailable(f"the {self.name} adapter has no CUDA support")

    def from_numpy(self, tree, device="cpu"):
        """A dict of NumPy arrays -> the same dict of framework arrays on `device`."""
        raise NotImplementedError

    def to_numpy(self, tree):
        """Framework arrays (an array or a dict) -> NumPy, synchronising the device.
        Default: arrays NumPy converts itself (the NumPy-based engines)."""
        import numpy as np

        if isinstance(tree, dict):
            return {k: np.asarray(v) for k, v in tree.items()}
        return np.asarray(tree)

    def value_and_grad(self, loss_fn, mode="eager"):
        """`step(params, inputs) -> (loss, grads)` for loss_fn(ops, params, inputs).

        In "compiled" mode the returned callable is the compiled gradient (jax.jit,
        tf.function, torch.compile, a compiled PyTensor function); compilation happens
        on its first call.
        """
        raise NotImplementedError

    def settings(self):
        """{name: value} of what load() configured (thread counts, flags), for the
        result's provenance: a copy of the `_settings` dict an adapter's load() fills
        (empty before load() and where it sets nothing)."""
        return dict(getattr(self, "_settings", None) or {})

    def set_matmul_precision(self, device, precision):
        """Make float32 matrix products (and convolutions) on `device` run at `precision`
        ("highest": full float32; "tf32": tensor cores), after load(); return what was
        set, in words, for the record. On the CPU nothing changes. An adapter that cannot
        set it says so (its framework's default then holds)."""
        if device == "cpu":
            return "cpu: float32 products in float32"
        return f"{self.name}: not set by gradmem (the framework's default)"

    #: what float32 matrix products run at on a GPU when nothing is set, where that is
    #: not full float32, for records from before gradmem set it (JAX: TF32)
    gpu_matmul_default = ""

    def split_vjp(self, loss_fn, mode="eager"):
        """(forward, backward) so the two phases can be measured apart, or None.

        `forward(params, inputs) -> state` computes the loss and keeps what backward
        needs; `backward(state) -> grads`. `loss_of(state)` gives the loss. Return
        None where the cell's step is one program (the phases are then measured as
        one): where the framework cannot split it, and in compiled mode wherever its
        users write one program for the step (``jax.jit(jax.value_and_grad(f))``):
        a split would be a different program, with every residual materialised between
        two compiled halves. A compiled step stays split only where the framework runs
        forward and backward as two programs itself (torch.compile's AOTAutograd)."""
        return None

    def loss_of(self, state):
        """The loss held by a `split_vjp` forward state."""
        return state[0]

    def step_program(self, mode, split):
        """What a cell's step runs, in words, for the record's ``step_program``: the
        program (`compiled_as` or `eager_as`) and whether the harness called it as one
        call returning the loss and the gradients or as a forward and a backward call
        (`split_vjp`). A compiled step is split only where the framework itself runs
        forward and backward as two programs (torch.compile, Paddle's to_static)."""
        program = self.compiled_as if mode == "compiled" else self.eager_as
        calls = ("a forward call, then a backward call (phases measured apart)" if split
                 else "one call returns the loss and the gradients (no phase split)")
        return f"{program}: {calls}"

    # ---- buffer caches (MLX, tinygrad): the memory pass measures what a step needs --
    def buffer_cache_off(self):
        """Turn off, for the memory pass, a cache of freed buffers that later steps are
        served from, so the step peak is what a step allocates, as in every other row;
        return what was turned off, in words, or None where there is no such cache.
        Called once after `load()`, before the baseline."""
        return None

    def buffer_cache_on(self):
        """Undo `buffer_cache_off` (to count what the cache holds between steps)."""

    def step_held_bytes(self):
        """(bytes, page kind, method) of the buffers a compiled step allocates once and
        keeps for every later call (TinyJit's captured buffers): memory the step needs
        that RSS sees as resident at the step's start. The memory pass counts them in
        the step peak and out of retained (the footprint is unchanged), with the method
        named; None where a step keeps nothing of its own between calls."""
        return None

    def buffer_cache_bytes(self):
        """(bytes, method) of what the framework's buffer cache and compiled steps hold
        now, or None where there is no such cache."""
        return None

    def sync(self, tree):
        """Block until every array in `tree` is computed (async dispatch, GPUs)."""
        return tree

    def optimizer(self, kind, params, lr=1e-3):
        """`update(params, grads) -> params`: one SGD or Adam step.

        The default is functional and written with the op set; adapters with a native
        optimizer (torch.optim) override it, since that is what their users run. An
        update may have ``state_arrays()``: the arrays it keeps between steps (Adam's
        moments), which the breakdown counts as ``optimizer_state``.
        """
        ops = self.ops
        if kind == "sgd":
            return _FunctionalSGD(ops, lr)
        check_choice("optimizer", kind, ("sgd", "adam"))
        return _FunctionalAdam(ops, lr)

    # ---- the framework's own prediction (harness/measure/prediction.py) --------------
    def predict_step_memory(self, loss_fn, params, inputs, mode):
        """The framework's own prediction of one gradient step's memory, taken without
        measuring it: a dict with

        - ``method``: the predictor's call, in words;
        - ``bytes``: the predicted figure that compares with our step peak (what the
          step allocates above what is resident at its start), and ``compares_with``
          saying how it was derived from the predictor's fields;
        - ``program`` (what was predicted) and ``same_program`` (False where the
          predictor could only plan another program than the measured one);
        - ``fields``: the predictor's own figures as they come; optionally
          ``categories`` (its split of the peak) and ``note``.

        Raises NoPrediction(reason) where the framework has none for `mode`. Called
        once in the memory pass after every measured step (never inside one)."""
        why = f": {self.no_predictor}" if self.no_predictor else ""
        raise NoPrediction(f"{self.name} has no memory predictor{why}")

    #: why the framework has no memory predictor, for the record (what each framework's
    #: documentation and source offer: docs/predicted.md)
    no_predictor = ""

    # ---- where the bytes go: the breakdown's hooks (harness/measure/breakdown.py) -----
    # Each runs in a step of its own after the measured steps, never inside them.

    #: True where the framework gives no way to list what a forward pass saves, and the
    #: breakdown should take the resident bytes live at the end of forward instead
    #: (and say so in the record)
    saved_activations_from_rss = False

    def saving(self):
        """A context manager around one forward pass, for adapters that must watch the
        pass to count what it saves (torch's saved-tensor hooks). Default: nothing."""
        return contextlib.nullcontext()

    def saved_activation_bytes(self, state, params, inputs):
        """(bytes, method) of the activations a `split_vjp` forward's `state` keeps for
        the backward at the end of forward, counted once per buffer, params and inputs
        excluded; (None, reason) where this adapter has no way to see them. The
        default is the null with its reason: an adapter adds one small method here."""
        return None, f"the {self.name} adapter has no way to count what its forward pass saves"

    def saved_by_op(self, state, params, inputs):
        """([(buffer key, bytes, framework op name)], method) of the buffers a `split_vjp`
        forward's `state` keeps for the backward, each with the op that made it, params
        and inputs excluded (harness/measure/saved_ops.py counts each buffer once and
        maps the names); (None, reason) where this adapter cannot tell which op made a
        saved buffer. Runs after a forward under `saving()`."""
        return None, f"the {self.name} adapter has no way to tell which op made a saved buffer"

    def backward_detail(self, run_backward):
        """{role: bytes} live at the highest point of `run_backward()` (the backward of
        the forward `saved_by_op` saw), by what made each buffer, or None where the
        adapter cannot see it (default: the backward is not run; the state is dropped)."""
        return None

    def buffer_bytes(self, tree):
        """{buffer key: bytes} of the distinct buffers of the arrays in `tree` (an array,
        or dicts/lists/tuples of them): two views of one buffer count once. The default
        knows NumPy arrays (keyed by the owning buffer's address) and anything with
        ``nbytes`` (keyed by identity); adapters whose arrays share storage override it."""
        found = {}
        for array in leaves(tree):
            base = array
            while getattr(base, "base", None) is not None and hasattr(base.base, "nbytes"):
                base = base.base
            iface = getattr(base, "__array_interface__", None)
            key = iface["data"][0] if iface else id(base)
            nbytes = getattr(base, "nbytes", None)
            if isinstance(nbytes, int):
                found[key] = nbytes
        return found

    # ---- CUDA: the one place per adapter that talks to the device allocator --------
    def device_memory_probe(self, device):
        """A probe with reset(), current_bytes(), peak_bytes() (and optionally
        reserved_bytes(), peak_reserved_bytes()) for the framework's own device
        allocator, or None on CPU."""
        return None


class SavedTensorRefs:
    """Weak references to the tensors a saved-tensor pack hook is given (torch's and
    Paddle's ``saved_tensors_hooks``): the tensor itself stays what is saved, so nothing
    changes for the backward; `bytes` counts those still alive once per buffer."""

    def __init__(self):
        self.refs = []

    def pack(self, tensor):
        import weakref

        self.refs.append(weakref.ref(tensor))
        return tensor

    @staticmethod
    def unpack(tensor):
        return tensor

    def by_producer(self, adapter, params, inputs, producer):
        """[(buffer key, bytes, producer(tensor))] of the saved tensors still alive, one
        per buffer (bytes as `bytes` counts them, so the two sums agree), params and
        inputs excluded."""
        outside = set(adapter.buffer_bytes([params, inputs]))
        found = {}
        for tensor in (ref() for ref in self.refs):
            if tensor is None:
                continue
            for key, nbytes in adapter.buffer_bytes(tensor).items():
                if key in outside:
                    continue
                if key not in found:
                    found[key] = [nbytes, producer(tensor)]
                found[key][0] = max(found[key][0], nbytes)
        return [(key, nbytes, name) for key, (nbytes, name) in found.items()]

    def bytes(self, adapter, params, inputs):
        """Bytes of the saved tensors still alive, params and inputs excluded."""
        outside = set(adapter.buffer_bytes([params, inputs]))
        found = adapter.buffer_bytes([t for t in (ref() for ref in self.refs) if t is not None])
        return sum(v for k, v in found.items() if k not in outside)


def leaves(tree):
    """The non-container items of `tree` (dicts, lists and tuples are walked)."""
    if isinstance(tree, dict):
        for value in tree.values():
            yield from leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from leaves(value)
    elif tree is not None:
        yield tree


def im2col_conv2d(xp, x, w, stride, shape):
    """conv2d (x NCHW, already padded; w OIHW) from array primitives, for engines
    without a fast convolution of their own (HIPS autograd, PyTensor): the kh*kw strided
    slices of the input, stacked into (N, C, kh*kw, Ho, Wo), contracted with the weights
    in one BLAS tensordot. The stack is what w's gradient needs, kh*kw times the input,
    as in any im2col convolution. `xp`: the engine's stack, tensordot, reshape and
    transpose; `shape(array)`: its static shape."""
    _, c, h, wd = shape(x)
    o, _, kh, kw = shape(w)
    ho, wo = (h - kh) // stride + 1, (wd - kw) // stride + 1
    cols = xp.stack(
        [
            x[:, :, i : i + stride * (ho - 1) + 1 : stride, j : j + stride * (wo - 1) + 1 : stride]
            for i in range(kh)
            for j in range(kw)
        ],
        axis=2,
    )
    out = xp.tensordot(cols, xp.reshape(w, (o, c, kh * kw)), axes=([1, 2], [1, 2]))
    return xp.transpose(out, (0, 3, 1, 2))  # (N, Ho, Wo, O) -> NCHW


class _FunctionalSGD:
    """Plain SGD written with the op set: keeps nothing between steps."""

    def __init__(self, ops, lr):
        self.ops, self.lr = ops, lr

    def __call__(self, params, grads):
        ops = self.ops
        return {k: ops.sub(params[k], ops.mul(grads[k], self.lr)) for k in params}

    def state_arrays(self):
        return []


class _FunctionalAdam:
    """Adam (Kingma & Ba) written with the op set; moments start at zero."""

    def __init__(self, ops, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.ops, self.lr, self.b1, self.b2, self.eps = ops, lr, b1, b2, eps
        self.t, self.m, self.v = 0, None, None

    def __call__(self, params, grads):
        ops, b1, b2 = self.ops, self.b1, self.b2
        self.t += 1
        if self.m is None:  # zero moments, shaped like the grads, in the grads' dtype
            self.m = {k: ops.mul(g, 0.0) for k, g in grads.items()}
            self.v = {k: ops.mul(g, 0.0) for k, g in grads.items()}
        new = {}
        for k, g in grads.items():
            self.m[k] = ops.add(ops.mul(self.m[k], b1), ops.mul(g, 1 - b1))
            self.v[k] = ops.add(ops.mul(self.v[k], b2), ops.mul(ops.mul(g, g), 1 - b2))
            m_hat = ops.div(self.m[k], 1 - b1**self.t)
            v_hat = ops.div(self.v[k], 1 - b2**self.t)
            step = ops.div(ops.mul(m_hat, self.lr), ops.add(ops.sqrt(v_hat), self.eps))
            new[k] = ops.sub(params[k], step)
        return new

    def state_arrays(self):
        """The two moments of every parameter (none before the first step)."""
        return [*(self.m or {}).values(), *(self.v or {}).values()]
