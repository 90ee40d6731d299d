"""MLX: the op set on ``mlx.core`` and ``mlx.nn``; eager (lazy graph) and ``mx.compile``.

MLX arrays are lazy: an op records a node, ``mx.eval`` computes. The gradient step is
what MLX users write: ``loss, grads = mx.value_and_grad(f)(params, inputs)`` then
**one** ``mx.eval(loss, grads)``. The evaluation order is MLX's own (measured:
evaluating gradients last layer first can lower the peak by a third: that would
be a different algorithm, not what the ordinary step does). The step evaluates inside
the call, so the time and the memory of the whole computation fall in the phase.

Ops: ``mx.matmul``, ``mx.take`` (embeddings: what ``nn.Embedding`` indexes),
``mx.softmax``, ``mx.logsumexp``, ``mx.cumsum``, ``nn.relu``... MLX's conv and pooling
are channels-last: ``conv2d`` transposes NCHW -> NHWC and OIHW -> OHWI for
``mx.conv2d`` and back, ``max_pool2d`` and ``upsample2d`` run ``nn.MaxPool2d`` and
``nn.Upsample(mode="nearest")`` between the same transposes; the transposes are MLX
ops whose buffers count, as for any MLX user holding NCHW data. Python numbers are
weakly typed: they never change an array's dtype.

dtypes: float32 only. MLX's CPU float64 is partial (0.32.4): ``exp`` is computed to
float32 precision and a strided ``conv2d`` raises "unsupported data type", so float64
cells are unavailable with that reason (``dtypes``), not measured as something else.

float32 sums: MLX's CPU reductions add naively in float32 (ml-explore/mlx#488; the sum
of 1M values near 0.728 is 0.6 % off). The adapter still calls ``mx.sum``/``mx.mean``,
what MLX users run, and the gradient check's float32 tolerance (1e-3) is not widened
for it: the loss and gradient errors it causes are measured and shown like any other
(tests/frameworks/test_mlx_tinygrad_paddle.py keeps the 1M-value case, so a fix upstream shows).

Modes:

- ``"eager"``: the lazy graph built op by op and evaluated by ``mx.eval``.
- ``"compiled"``: ``mx.compile(mx.value_and_grad(loss))``: MLX traces the step once per
  input shape and fuses elementwise ops; on CPU it writes the fused kernels as C++ and
  builds them with ``g++`` on the first call (seconds; cached per MLX version in the
  temp dir).

``split_vjp``: None, the phases are measured together. ``mx.vjp`` takes the cotangent
up front and returns no backward function, and nothing runs before ``mx.eval``: a
forward phase would exist only by evaluating the forward first, which changes what is
kept (a different algorithm).

Memory: MLX keeps freed buffers in its own cache (``mx.get_cache_memory``) and serves
later steps from it, so measured with the cache on, a step's peak above its start was
the few KiB the cache could not serve (rnn_fanout small: 88 KiB, 0.06x the bound): a
figure of what the cache already held, not of what the step needs. The memory pass
therefore runs with ``mx.set_cache_limit(0)`` (freed buffers go back at once:
`buffer_cache_off`), so the step peak means what it means in every other row; what
the cache would hold between steps is measured after the measured steps, with the
cache on again, and recorded as the record's ``buffer_cache`` (retained, named). The
time pass runs with MLX's default cache, as MLX users run it.

Breakdown (harness/measure/breakdown.py): the saved activations are null with the
no-split reason (there is no end of forward; MLX has no API listing what a vjp keeps
either); params, inputs and gradients are counted by ``mx.array.nbytes`` (the base
class's ``buffer_bytes``).

Time: the Linux CPU wheel (``mlx[cpu]``) computes matmuls with a bundled *reference*
BLAS, ~13x slower than OpenBLAS on a 1024^3 product (docs/design.md, Evidence), and its
CPU ops run on one thread: MLX times here say little about MLX as Apple ships it
(Accelerate, Metal). MLX has no thread-count API; ``settings()`` says so.

Remat: ``"native"`` = ``mx.checkpoint(f)`` on each ``checkpoint`` segment and each of
the ceil(sqrt(n)) segments of a ``chain``, eager and compiled (dicts are trees to it).

Optimizer: the base class's functional SGD/Adam on the op set (``mlx.optimizers.Adam``
defaults to no bias correction, a different update from the other rows').
"""

import types

from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import Adapter, Unavailable

#: the distributions that give the ``mlx`` front end a backend on Linux
BACKENDS = ("mlx-cpu", "mlx-cuda12", "mlx-cuda13", "mlx-metal")


class MlxAdapter(Adapter):
    name = "mlx"
    module = "mlx"
    distributions = ("mlx", *BACKENDS)
    modes = ("eager", "compiled")
    dtypes = ("float32",)
    dtype_note = ("MLX's CPU float64 is partial in 0.32.4: exp is computed to float32 precision (abs error 1e-6), "
                  "strided conv2d raises '[Convolution::eval] got unsupported data type'")
    compiled_as = "mx.compile(mx.value_and_grad(loss)): fused C++ kernels built by g++ on CPU"
    no_predictor = "it exposes measured counters only (mx.get_peak_memory), nothing that plans a step"
    eager_as = "mx.value_and_grad(loss), then one mx.eval(loss, grads) of the lazy graph"
    remats = ("none", "native")
    environment = {}

    def pinned_requirement(self, version):
        # the ``mlx`` front end alone has no backend on Linux and does not load: a pinned
        # release needs its CPU backend of the same version, as ``pip install mlx[cpu]``
        return f"mlx[cpu]=={version}"

    def __init__(self):
        self.device = "cpu"

    def available(self):
        ok, reason = super().available()
        if not ok:
            return ok, reason
        import sys

        if sys.platform != "darwin" and not self.versions().keys() & set(BACKENDS):
            # `pip install mlx` on Linux brings only the front end: import fails later
            return False, "mlx is installed without a backend (pip install 'gradmem[mlx]', which installs mlx[cpu])"
        return True, ""

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        strategy, _ = self.check_remat(remat)
        import mlx.core as mx

        if device == "cuda":
            _use_cuda_or_raise(mx)
        else:
            mx.set_default_device(mx.cpu)
        if mode == "compiled":
            import shutil

            if shutil.which("g++") is None:
                raise Unavailable("mx.compile on CPU builds its kernels with g++, which is not on PATH")
        self.device = device
        self._settings = {
            "threads": threads.thread_count(),
            "mlx threads": "not settable (MLX has no thread API; its CPU ops run on one stream thread)",
            "mlx default device": str(mx.default_device()),
            "evaluation": "one mx.eval(loss, grads) per step",
            "remat": "native (mx.checkpoint)" if strategy == "native" else "none",
        }
        self.ops = _make_ops(mx)
        if strategy == "native":
            checkpoint = lambda f, *xs: mx.checkpoint(f)(*xs)  # noqa: E731
            self.ops.checkpoint, self.ops.chain = checkpoint, remat_lib.chain_of(checkpoint)
        return self

    def cuda_device(self):
        ok, reason = self.available()
        if not ok:
            raise Unavailable(reason)
        import mlx.core as mx

        _check_cuda(mx)
        return mx.gpu

    def from_numpy(self, tree, device="cpu"):
        import mlx.core as mx

        for v in tree.values():
            if v.dtype.kind == "f":
                self.check_dtype(str(v.dtype))  # mx.array would silently make float64 float32
        arrays = {k: mx.array(v) for k, v in tree.items()}
        mx.eval(arrays)
        return arrays

    def to_numpy(self, tree):
        import numpy as np

        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        return np.array(tree)  # evaluates the array first

    def sync(self, tree):
        import mlx.core as mx

        mx.eval(tree)
        return tree

    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        import mlx.core as mx

        ops = self.ops
        value_and_grad = mx.value_and_grad(lambda params, inputs: loss_fn(ops, params, inputs))
        if mode == "compiled":
            value_and_grad = mx.compile(value_and_grad)

        def step(params, inputs):
            loss, grads = value_and_grad(params, inputs)
            mx.eval(loss, grads)  # one evaluation of the loss and every gradient
            return loss, grads

        return step

    # ---- the buffer cache (module docstring, "Memory") --------------------------------
    def buffer_cache_off(self):
        import mlx.core as mx

        self._cache_limit = mx.set_cache_limit(0)  # returns the previous limit
        mx.clear_cache()
        return "MLX's buffer cache off: mx.set_cache_limit(0), mx.clear_cache() (freed buffers returned at once)"

    def buffer_cache_on(self):
        import mlx.core as mx

        # the limit buffer_cache_off replaced (mx.get_memory_limit, MLX's default, only
        # where it was never turned off: 0.32.0 has no get_memory_limit)
        limit = getattr(self, "_cache_limit", None)
        mx.set_cache_limit(limit if limit is not None else mx.get_memory_limit())

    def buffer_cache_bytes(self):
        import mlx.core as mx

        return mx.get_cache_memory(), "mx.get_cache_memory(): freed buffers MLX keeps for reuse"

    # ---- CUDA (mlx[cuda12]; Metal on macOS is MLX's "gpu" too) ---------------------
    def device_memory_probe(self, device):
        if device != "cuda":
            return None
        import mlx.core as mx

        return MlxAllocatorProbe(mx)


class MlxAllocatorProbe:
    """MLX's own allocator counters (``mx.get_active_memory``, ``get_peak_memory``,
    ``reset_peak_memory``; ``get_cache_memory`` as the reserved figure). Absolute bytes;
    ``reset()`` resets the peak, so peaks count from it. Every read evaluates nothing
    new: the step has already called ``mx.eval``. Not run here: no GPU."""

    peak_since_reset = True
    method = "mlx get_peak_memory after reset_peak_memory"

    def __init__(self, mx):
        self.mx = mx
        self.baseline_bytes = 0

    def reset(self):
        self.mx.synchronize()
        self.mx.reset_peak_memory()
        self.baseline_bytes = self.mx.get_active_memory()

    def current_bytes(self):
        self.mx.synchronize()
        return self.mx.get_active_memory()

    def peak_bytes(self):
        self.mx.synchronize()
        return self.mx.get_peak_memory()

    def reserved_bytes(self):
        return self.mx.get_active_memory() + self.mx.get_cache_memory()


def _cuda_available(mx):
    cuda = getattr(mx, "cuda", None)
    return bool(cuda is not None and cuda.is_available())


def _check_cuda(mx):
    if not _cuda_available(mx):
        raise Unavailable(
            "MLX here has no CUDA backend or sees no GPU (pip install 'mlx[cuda13]', or 'mlx[cuda12]' for "
            "CUDA 12, on a machine with one; mx.cuda.is_available() is False)"
        )


def _use_cuda_or_raise(mx):
    _check_cuda(mx)
    mx.set_default_device(mx.gpu)



# ---- the op set -------------------------------------------------------------------------
def _make_ops(mx):
    import mlx.nn as nn

    def nhwc(x):
        return mx.transpose(x, (0, 2, 3, 1))

    def nchw(x):
        return mx.transpose(x, (0, 3, 1, 2))

    def conv2d(x, w, stride=1, padding=0):
        # MLX: input NHWC, weight OHWI
        return nchw(mx.conv2d(nhwc(x), mx.transpose(w, (0, 2, 3, 1)), stride=stride, padding=padding))

    def max_pool2d(x, size=2):
        return nchw(nn.MaxPool2d(size, stride=size)(nhwc(x)))

    def upsample2d(x, scale=2):
        return nchw(nn.Upsample(scale_factor=scale, mode="nearest")(nhwc(x)))

    return types.SimpleNamespace(
        add=mx.add,
        sub=mx.subtract,
        mul=mx.multiply,
        div=mx.divide,
        neg=mx.negative,
        exp=mx.exp,
        log=mx.log,
        sqrt=mx.sqrt,
        tanh=mx.tanh,
        sigmoid=mx.sigmoid,
        relu=nn.relu,
        sin=mx.sin,
        cos=mx.cos,
        matmul=mx.matmul,
        sum=lambda x, axis=None, keepdims=False: mx.sum(x, axis=axis, keepdims=keepdims),
        mean=lambda x, axis=None, keepdims=False: mx.mean(x, axis=axis, keepdims=keepdims),
        max=lambda x, axis=None, keepdims=False: mx.max(x, axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: mx.reshape(x, tuple(shape)),
        permute_dims=lambda x, axes: mx.transpose(x, tuple(axes)),
        concat=lambda xs, axis=0: mx.concatenate(list(xs), axis=axis),
        stack=lambda xs, axis=0: mx.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=lambda x, indices, axis=0: mx.take(x, indices, axis=axis),
        where=mx.where,
        softmax=lambda x, axis=-1: mx.softmax(x, axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: mx.logsumexp(x, axis=axis, keepdims=keepdims),
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: mx.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )
