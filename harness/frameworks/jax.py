"""JAX: the op set on ``jax.numpy``, ``jax.nn`` and ``jax.lax``; eager and ``jax.jit``.

Ops: ``jnp.matmul``, ``jnp.take`` (embeddings), ``jax.nn.softmax`` / ``logsumexp`` /
``sigmoid`` / ``relu``, ``jax.lax.conv_general_dilated`` with NCHW/OIHW dimension
numbers (XLA picks its own layout), ``jax.lax.reduce_window`` with ``lax.max`` for
pooling (its gradient is XLA's select-and-scatter), ``jax.image.resize(...,
"nearest")`` for nearest upsampling (JAX's own resize; ``jnp.repeat`` on H and W
computes the same values but, eager, compiles more per-op programs that JAX keeps). Python numbers are weakly typed in JAX, so
they never change an array's dtype.

float64: ``load()`` turns on ``jax_enable_x64``, otherwise JAX silently computes a
float64 workload in float32.

Modes:

- ``"eager"``: ``jax.value_and_grad`` called without ``jit``: every primitive runs as
  soon as it is traced, op by op, and the linearised residuals are concrete arrays
  (JAX compiles each primitive once per shape on first use: warm up before timing).
- ``"compiled"``: ``jax.jit(jax.value_and_grad(loss))``: XLA plans the buffers of the
  whole forward + backward. The workloads' Python loops are unrolled into the trace,
  so compile time grows with loop length (207 s at L=2000: docs/design.md, Evidence).

``split_vjp``: eager = ``jax.vjp`` (forward, keeping the residuals in the returned VJP
function) and that function applied to a cotangent of one. Compiled: None, so a
compiled cell runs and measures the one program JAX users write,
``jax.jit(jax.value_and_grad(loss))``, with no phase split. A jitted forward returning
the VJP's residuals and a jitted backward taking them is a different program: XLA
must materialise every residual between the two and cannot plan the step as a whole
(measured on chained_dot small float32: 1.85x the one program's step peak, 99.2 vs
53.5 MiB; docs/measurement.md).

``optimizer``: the base class's functional SGD/Adam on the op set (optax is not a
dependency), run op by op.

Remat (``load(..., remat=)``), in both modes (``jax.checkpoint`` under ``jit`` is its
normal use; eager it works too, the residuals of a checkpointed segment being only its
inputs): ``"native"`` = ``jax.checkpoint(f)`` (policy ``nothing_saveable``, the
default: only the segment's inputs are kept); ``"native:dots_saveable"`` = policy
``jax.checkpoint_policies.dots_with_no_batch_dims_saveable`` (matmul outputs without
batch dimensions are kept, the rest recomputed). Each ``checkpoint`` segment and each
of the ceil(sqrt(n)) segments of a ``chain`` is one ``jax.checkpoint``.
"""

import os
import re
import sys

from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import COMPILE_CACHE_ENV, Adapter, NoPrediction, Unavailable

# remat spelling -> name of the jax.checkpoint_policies policy (None: the default,
# nothing_saveable)
NATIVE_POLICIES = {"native": None, "native:dots_saveable": "dots_with_no_batch_dims_saveable"}


class JaxAdapter(Adapter):
    name = "jax"
    module = "jax"
    # Spawned, not forked from a zygote (harness/sweep/zygote.py), until a controlled
    # comparison clears it: forked, seq2seq_attention small's step peak read about 1 MiB
    # higher than spawned, though spawned full sweeps spread as widely
    # (docs/measurement.md, "How a worker starts"). The import a fork saves is under 1 s.
    preload = ()
    distributions = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")
    modes = ("eager", "compiled")
    compiled_as = "jax.jit(jax.value_and_grad(loss)), one XLA program"
    eager_as = "jax.vjp and its VJP function, no jit: each primitive dispatched as it is traced"
    remats = ("none", *NATIVE_POLICIES)
    # GPU: no 75 % preallocation, so the device holds what JAX uses (NVML figures mean
    # something); BFC stats are unaffected. XLA_PYTHON_CLIENT_ALLOCATOR=platform is
    # not set: it is silently BFC and does not free in jaxlib 0.10.2 (docs/design.md, Evidence).
    environment = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}

    def __init__(self):
        self._device = None

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        strategy, variant = self.check_remat(remat)
        for key, value in self.environment.items():
            os.environ.setdefault(key, value)  # read when the backend starts
        settings = _fix_threads()
        import jax

        jax.config.update("jax_enable_x64", True)
        if device == "cuda":
            jax_device = self.cuda_device()
            settings["compile_cache"] = self.use_compile_cache()
        else:
            jax_device = jax.devices("cpu")[0]
        # Arrays made without an explicit device (constants inside ops) go here too.
        jax.config.update("jax_default_device", jax_device)
        self._device = jax_device
        settings.update(
            {
                "jax_enable_x64": True,
                "jax_default_device": str(jax_device),
                "device_kind": jax_device.device_kind,  # the GPU model on cuda
                **{key: os.environ.get(key) for key in self.environment},
                "remat": remat_lib.format_remat(strategy, variant),
            }
        )
        self._settings = settings
        self.ops = _make_ops(jax)
        if strategy == "native":
            policy_name = NATIVE_POLICIES[remat_lib.format_remat(strategy, variant)]
            checkpoint = _native_checkpoint(jax, policy_name)
            self.ops.checkpoint, self.ops.chain = checkpoint, remat_lib.chain_of(checkpoint)
            settings["remat"] += f" (jax.checkpoint, policy {policy_name or 'nothing_saveable'})"
        return self

    def cuda_device(self):
        import jax

        return _cuda_device_or_raise(jax)

    def from_numpy(self, tree, device="cpu"):
        import jax

        target = self._device if self._device is not None else jax.devices(device)[0]
        return {k: jax.device_put(v, target) for k, v in tree.items()}

    def to_numpy(self, tree):
        import numpy as np

        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        return np.asarray(tree)  # waits for the computation (async dispatch)

    def sync(self, tree):
        import jax

        return jax.block_until_ready(tree)

    def _bound(self, loss_fn):
        ops = self.ops
        return lambda params, inputs: loss_fn(ops, params, inputs)

    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        import jax

        step = jax.value_and_grad(self._bound(loss_fn))
        return jax.jit(step) if mode == "compiled" else step

    def split_vjp(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        import jax
        import jax.numpy as jnp

        if mode == "compiled":
            return None  # one jax.jit(jax.value_and_grad(loss)): module docstring
        loss = self._split_loss = self._bound(loss_fn)

        def forward(params, inputs):
            return jax.vjp(lambda p: loss(p, inputs), params)  # (loss, vjp_fn)

        def backward_of(value, vjp_fn):
            (grads,) = vjp_fn(jnp.ones_like(value))
            return grads

        return forward, lambda state: backward_of(*state)

    # ---- the framework's own prediction (harness/measure/prediction.py) ----------------
    def predict_step_memory(self, loss_fn, params, inputs, mode):
        if mode != "compiled":
            raise NoPrediction(
                "eager JAX dispatches each primitive as its own small program: XLA plans no "
                "buffers for the whole step, so there is no plan to read a prediction from"
            )
        compiled = self.value_and_grad(loss_fn, "compiled").lower(params, inputs).compile()
        stats = compiled.memory_analysis()
        if stats is None:
            raise NoPrediction("compiled.memory_analysis() returned None on this backend")
        fields = {name: int(getattr(stats, name)) for name in dir(stats) if name.endswith("_in_bytes")}
        # What the step allocates above what is resident at its start: its outputs (loss
        # and gradients) and XLA's temp buffer, less outputs that reuse an argument's
        # buffer. Arguments (params, inputs) and the generated code are resident before.
        predicted = fields["output_size_in_bytes"] + fields["temp_size_in_bytes"] - fields["alias_size_in_bytes"]
        held = fields["argument_size_in_bytes"] + fields["output_size_in_bytes"] - fields["alias_size_in_bytes"]
        peak_means = (
            "here equals argument + output - alias (temp left out): not the step's high-water mark"
            if abs(fields["peak_memory_in_bytes"] - held) <= 64
            else "the backend's high-water mark of the program (differs from argument + output - alias)"
        )
        return {
            "method": "jax.jit(jax.value_and_grad(loss)).lower(params, inputs).compile().memory_analysis()",
            "bytes": predicted,
            "compares_with": "output + temp - alias: what the step allocates above the resident "
            "params and inputs, as the step peak counts",
            "program": self.compiled_as,
            "same_program": True,
            "fields": fields,
            "categories": {"output": fields["output_size_in_bytes"], "temp": fields["temp_size_in_bytes"],
                           "alias": -fields["alias_size_in_bytes"]},
            "note": f"peak_memory_in_bytes {peak_means}",
        }

    # ---- the breakdown's hooks ---------------------------------------------------------
    def saved_activation_bytes(self, state, params, inputs):
        import jax

        residuals = jax.tree_util.tree_leaves(state[1])  # the VJP function is a pytree
        outside = set(self.buffer_bytes([params, inputs]))
        found = self.buffer_bytes(residuals)
        method = ("the leaves of the jax.vjp function's residuals at the end of forward, counted once "
                  "per buffer, params and inputs excluded")
        return sum(v for k, v in found.items() if k not in outside), method

    def saved_by_op(self, state, params, inputs):
        """JAX's own list of a VJP's residuals with their sources
        (``jax._src.ad_checkpoint.saved_residuals``, what ``print_saved_residuals``
        prints), traced from the same loss: "output of tanh from file:line" is named
        by its primitive; arguments (the params) are left out, and so are constants of
        an input's shape and dtype (the inputs, closed over by the loss), one per input."""
        import jax
        from jax._src.ad_checkpoint import saved_residuals

        loss = getattr(self, "_split_loss", None)
        if loss is None:
            return None, "no split forward was made (split_vjp)"
        inputs_left = [(tuple(a.shape), str(a.dtype)) for a in jax.tree_util.tree_leaves(inputs)]
        entries = []
        for index, (aval, source) in enumerate(saved_residuals(lambda p: loss(p, inputs), params)):
            if source.startswith("from the argument"):
                continue
            shape, dtype = tuple(aval.shape), str(aval.dtype)
            if source.startswith("from a constant") and (shape, dtype) in inputs_left:
                inputs_left.remove((shape, dtype))
                continue
            match = re.match(r"output of (\S+)", source)
            name = match.group(1) if match else source.split(" from ")[0].strip() or "residual"
            entries.append((("residual", index), int(aval.size) * aval.dtype.itemsize, name))
        method = ("jax._src.ad_checkpoint.saved_residuals on the loss (inputs closed over): each residual once, "
                  "under the primitive that made it; its bytes from its shape and dtype (the traced program's "
                  "residuals, not the buffers of this step)")
        return entries, method

    def buffer_bytes(self, tree):
        import jax
        import numpy as np

        from harness.frameworks.base import Adapter, leaves

        found = {}
        for array in leaves(tree):
            if isinstance(array, jax.Array):
                for shard in array.addressable_shards:
                    data = shard.data
                    found[("jax", data.unsafe_buffer_pointer())] = data.nbytes
            elif isinstance(array, np.ndarray):  # constants a residual may hold
                found.update(Adapter.buffer_bytes(self, array))
        return found

    # ---- CUDA: everything device-specific for JAX is below ---------------------------
    gpu_matmul_default = "TF32 (jax_default_matmul_precision)"

    def set_matmul_precision(self, device, precision):
        if device == "cpu":
            return super().set_matmul_precision(device, precision)
        import jax

        # JAX's default on a GPU is TF32 for float32 products ("default" precision)
        value = "tensorfloat32" if precision == "tf32" else "highest"
        jax.config.update("jax_default_matmul_precision", value)
        return f"jax_default_matmul_precision={value}"

    @staticmethod
    def use_compile_cache():
        """On CUDA, the cell's passes share JAX's persistent compilation cache (the
        directory the sweep names in GRADMEM_COMPILE_CACHE_DIR): one compile per cell,
        and the fresh process that measures the step alone loads its executables, so no
        compile or autotuning enters its peak (harness/measure/worker.py, _step_alone).
        Every program is cached, however quick its compile (eager runs many small ones)."""
        import jax

        path = os.environ.get(COMPILE_CACHE_ENV)
        if not path:
            return None
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        return path

    def device_memory_probe(self, device):
        if device != "cuda":
            return None  # memory_stats() is None on CPU
        return JaxCudaProbe(self._device)


class JaxCudaProbe:
    """XLA's BFC allocator on one GPU, from ``device.memory_stats()``. All figures are
    absolute bytes; ``baseline_bytes`` is ``bytes_in_use`` at ``reset()``.

    jaxlib 0.10.2 cannot reset the peak (jax#8096): ``peak_bytes()`` is the peak
    *since the process started* (compilation and autotuning scratch included), so
    ``peak_bytes() - baseline_bytes`` is the phase's peak only if nothing earlier in
    the process went higher. One measured phase per fresh process is exact; later
    phases are upper bounds (``peak_since_reset`` is False to say so). Reads wait for
    every live array first (async dispatch)."""

    peak_since_reset = False
    method = "jax Device.memory_stats() peak_bytes_in_use (since the process started)"

    def __init__(self, device):
        self.device = device
        self.baseline_bytes = 0

    def _stats(self):
        import jax

        jax.block_until_ready(jax.live_arrays())
        return self.device.memory_stats() or {}

    def reset(self):
        self.baseline_bytes = self._stats().get("bytes_in_use", 0)

    def current_bytes(self):
        return self._stats().get("bytes_in_use", 0)

    def peak_bytes(self):
        return self._stats().get("peak_bytes_in_use", 0)

    def reserved_bytes(self):
        return self._stats().get("pool_bytes")

    def peak_reserved_bytes(self):
        # What the BFC allocator holds from the device: its pool, which only grows, so
        # the pool at a phase's end is its highest during it. ("bytes_reserved" is the
        # preallocated region: 0 with XLA_PYTHON_CLIENT_PREALLOCATE=false, as on the
        # H200 run; a jaxlib without "pool_bytes" gives no reserved figure.)
        return self._stats().get("pool_bytes")


def _cuda_device_or_raise(jax):
    """JAX's first CUDA device, or Unavailable saying why there is none."""
    import importlib.util

    try:
        return jax.devices("cuda")[0]
    except RuntimeError as err:
        if importlib.util.find_spec("jax_plugins") is None:
            raise Unavailable(
                "jaxlib here has no CUDA backend (pip install 'jax[cuda12]' on a machine with a GPU)"
            ) from err
        raise Unavailable(f"JAX found no usable CUDA GPU: {err}") from err


# ---- threads ----------------------------------------------------------------------------
def _fix_threads():
    """XLA's CPU client sizes its Eigen pool from PJRT_NPROC when it starts (there is
    no API): set it before the backend exists. A second load() in the same process
    (tests) finds the backend running and records the count it started with."""
    count = threads.thread_count()
    started = "jax" in sys.modules and _backends_running()
    if not started:
        os.environ["PJRT_NPROC"] = str(count)
    return {
        "threads": count,
        "PJRT_NPROC": os.environ.get("PJRT_NPROC"),
        "xla_backend_started_before_load": started,
    }


def _backends_running():
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


# ---- the op set -------------------------------------------------------------------------
def _native_checkpoint(jax, policy_name):
    """checkpoint(f, *xs) = jax.checkpoint(f, policy=...)(*xs); dicts are pytrees."""
    policy = None if policy_name is None else getattr(jax.checkpoint_policies, policy_name)

    def checkpoint(f, *xs):
        return jax.checkpoint(f, policy=policy)(*xs)

    return checkpoint


def _make_ops(jax):
    import types

    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    def conv2d(x, w, stride=1, padding=0):
        return lax.conv_general_dilated(
            x,
            w,
            window_strides=(stride, stride),
            padding=((padding, padding), (padding, padding)),
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )

    def max_pool2d(x, size=2):
        # -inf of x's dtype: JAX recognises (max, -inf) as the max monoid and uses its
        # differentiable reduce_window_max; "VALID" drops a ragged edge, as torch does.
        window = (1, 1, size, size)
        return lax.reduce_window(x, np.array(-np.inf, x.dtype), lax.max, window, window, "VALID")

    def upsample2d(x, scale=2):
        n, c, h, w = x.shape
        return jax.image.resize(x, (n, c, h * scale, w * scale), method="nearest")

    return types.SimpleNamespace(
        add=jnp.add,
        sub=jnp.subtract,
        mul=jnp.multiply,
        div=jnp.true_divide,
        neg=jnp.negative,
        exp=jnp.exp,
        log=jnp.log,
        sqrt=jnp.sqrt,
        tanh=jnp.tanh,
        sigmoid=jax.nn.sigmoid,
        relu=jax.nn.relu,
        sin=jnp.sin,
        cos=jnp.cos,
        matmul=jnp.matmul,
        sum=lambda x, axis=None, keepdims=False: jnp.sum(x, axis=axis, keepdims=keepdims),
        mean=lambda x, axis=None, keepdims=False: jnp.mean(x, axis=axis, keepdims=keepdims),
        max=lambda x, axis=None, keepdims=False: jnp.max(x, axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: jnp.reshape(x, tuple(shape)),
        permute_dims=lambda x, axes: jnp.transpose(x, tuple(axes)),
        concat=lambda xs, axis=0: jnp.concatenate(list(xs), axis=axis),
        stack=lambda xs, axis=0: jnp.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=lambda x, indices, axis=0: jnp.take(x, indices, axis=axis),
        where=jnp.where,
        softmax=lambda x, axis=-1: jax.nn.softmax(x, axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: jax.nn.logsumexp(x, axis=axis, keepdims=keepdims),
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: jnp.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )
