"""TensorFlow: the op set on ``tf.*``; eager (GradientTape) and ``tf.function``.

Ops: ``tf.linalg.matmul``, ``tf.gather`` (embeddings), ``tf.nn.softmax``,
``tf.reduce_logsumexp``, ``tf.math.cumsum``, ``tf.nn.conv2d``, ``tf.nn.max_pool2d``...
Binary elementwise ops are the Python operators (``x + y`` is ``tf.math.add``), which
convert a Python number to the tensor's dtype on either side (``tf.math.add(2.0, x)``
with a float64 ``x`` fails: it converts 2.0 to float32 first).

NCHW: on the CPU, TF 2.21's ``conv2d`` takes ``data_format="NCHW"`` only with oneDNN
on (``TF_ENABLE_ONEDNN_OPTS=1``; its default depends on the CPU, and where it is off
Eigen's kernels run and NCHW raises "only supports NHWC"), and ``max_pool2d``'s
gradient needs NHWC even with oneDNN. So both ops transpose NCHW -> NHWC (and the OIHW
weights -> HWIO) in and back out: real TF ops whose buffers count in TF's memory, as
for any TF user holding NCHW data on a CPU. A same-size convolution is written
``padding="SAME"``, the form TF users write (an explicit padding list computes the same
values through a separate pad). ``upsample2d`` is ``tf.repeat`` on H and W,
layout-free (``tf.image.resize`` would need the same transposes).

Gradients: ``tape.gradient`` of ``tf.gather`` is an ``IndexedSlices``; it is made
dense (``tf.convert_to_tensor``), as torch's ``embedding`` and JAX's ``take`` give
dense gradients, so every framework returns the same kind of array. Params that do
not reach the loss get zeros (``UnconnectedGradients.ZERO``).

Modes:

- ``"eager"``: the loss runs op by op under a ``tf.GradientTape``; ``tape.gradient``
  runs the recorded backward.
- ``"compiled"``: the same gradient step in a ``tf.function`` (graph mode, Grappler's
  rewrites, inter-op parallel execution). ``jit_compile`` is off: plain
  ``tf.function`` is what most TF code runs. ``TensorflowAdapter(jit_compile=True)``
  selects XLA (its memory differs: 158 vs 116 MB, docs/design.md, Evidence).

``split_vjp``: eager = the forward under a ``GradientTape`` (the tape keeps what the
backward needs), backward = ``tape.gradient``. Compiled: None, the phases are measured
together. A tape cannot leave a ``tf.function``: the forward's intermediates live in
the graph's execution frame and are freed when the function returns, so a separate
backward function would have to recompute the forward (it would measure a different
algorithm, not a phase).

``optimizer``: the base class's functional SGD/Adam on the op set. Keras optimizers
need ``tf.Variable`` params and add Keras' own slot bookkeeping; the functional step
keeps the three frameworks' optimizer phases comparable.

Remat (``load(..., remat=)``): ``"native"`` = ``tf.recompute_grad(f)`` on each
``checkpoint`` segment and each of the ceil(sqrt(n)) segments of a ``chain``, eager
and under ``tf.function``. recompute_grad's custom gradient differentiates its
top-level tensor arguments only, so a segment's dicts are passed flattened
(remat.flat_checkpoint).
"""

import os
import sys

from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import Adapter, NoPrediction, Unavailable


class TensorflowAdapter(Adapter):
    name = "tensorflow"
    module = "tensorflow"
    distributions = ("tensorflow", "tensorflow-cpu", "keras")
    package = "tensorflow-cpu"  # a pinned version: the CPU wheel, as pyproject's extra
    modes = ("eager", "compiled")
    compiled_as = "tf.function(gradient step), jit_compile=False"
    eager_as = "tf.GradientTape: the loss op by op under the tape, then tape.gradient"
    remats = ("none", "native")
    # The breakdown's saved activations: a GradientTape has no public way to list the
    # tensors it keeps, so the breakdown takes the resident bytes live at the end of
    # forward above the step's start, and says so in the record.
    saved_activations_from_rss = True
    # TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1 is not here on purpose: oneDNN's CPU allocator
    # is a caching BFC pool (blocks >= 4 KiB) that hides peaks from RSS (docs/design.md, Evidence),
    # so the *memory* pass sets it (harness/sweep/environment.py MEMORY_SETTINGS),
    # while the time pass runs TF's default, what users run. settings() records it.
    environment = {
        # GPU: grow the BFC pool on demand instead of taking almost all the memory.
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        # Keep the worker's stderr for errors (no INFO/WARNING start-up banner).
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }

    def __init__(self, jit_compile=False):
        self.jit_compile = bool(jit_compile)
        if self.jit_compile:
            self.compiled_as = "tf.function(gradient step, jit_compile=True): XLA"
        self._device_name = "/CPU:0"

    # ---- in the worker -------------------------------------------------------------
    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        strategy, _ = self.check_remat(remat)
        fresh = "tensorflow" not in sys.modules
        if fresh:  # these are read when TF starts; a worker has set them already
            for key, value in self.environment.items():
                os.environ.setdefault(key, value)
        import tensorflow as tf

        settings = _fix_threads(tf)
        if device == "cuda":
            self._device_name = self.cuda_device()
        else:
            _hide_gpus(tf)
            self._device_name = "/CPU:0"
        for key in (*self.environment, "TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "TF_ENABLE_ONEDNN_OPTS"):
            settings[key] = os.environ.get(key)
        settings["tf.function jit_compile"] = self.jit_compile
        settings["tensorflow imported by load"] = fresh
        settings["remat"] = "native (tf.recompute_grad)" if strategy == "native" else "none"
        self._settings = settings
        self.ops = _make_ops(tf)
        if strategy == "native":
            checkpoint = remat_lib.flat_checkpoint(lambda g, *flat: tf.recompute_grad(g)(*flat))
            self.ops.checkpoint, self.ops.chain = checkpoint, remat_lib.chain_of(checkpoint)
        return self

    def cuda_device(self):
        import tensorflow as tf

        return _cuda_device_or_raise(tf)

    def from_numpy(self, tree, device="cpu"):
        import tensorflow as tf

        with tf.device(self._device_name):
            # identity places the copy on the device (constant() builds on the host)
            return {k: tf.identity(tf.constant(v)) for k, v in tree.items()}

    def to_numpy(self, tree):
        if isinstance(tree, dict):
            return {k: self.to_numpy(v) for k, v in tree.items()}
        return tree.numpy()  # copies to the host, waiting for the device

    def sync(self, tree):
        if self._device_name != "/CPU:0":
            import tensorflow as tf

            tf.test.experimental.sync_devices()
        return tree  # CPU: eager ops and tf.function calls return computed tensors

    def _gradient_step(self, loss_fn):
        import tensorflow as tf

        ops, device_name = self.ops, self._device_name

        def step(params, inputs):
            with tf.device(device_name):
                with tf.GradientTape() as tape:
                    tape.watch(params)
                    loss = loss_fn(ops, params, inputs)
                grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
                return loss, _dense(tf, grads)

        return step

    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        import tensorflow as tf

        step = self._gradient_step(loss_fn)
        if mode == "compiled":
            return tf.function(step, jit_compile=self.jit_compile)
        return step

    # ---- the framework's own prediction (harness/measure/prediction.py) ----------------
    def predict_step_memory(self, loss_fn, params, inputs, mode):
        """XLA's buffer assignment of the step compiled with ``jit_compile=True``, read
        from the files XLA dumps (``--xla_dump_to``; a debug format, parsed here)."""
        import glob
        import shutil
        import tempfile

        import tensorflow as tf

        if mode != "compiled":
            raise NoPrediction("TF eager runs each op as it is called: no plan of the step exists")
        dump = tempfile.mkdtemp(prefix="gradmem-xla-")
        before = os.environ.get("XLA_FLAGS")
        # XLA reads its flags when it first compiles; in a worker that is here (the
        # measured tf.function runs without XLA), after every measured step
        os.environ["XLA_FLAGS"] = f"{before or ''} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()
        try:
            step = tf.function(self._gradient_step(loss_fn), jit_compile=True)
            self.sync(step(params, inputs))
            found = sorted(glob.glob(os.path.join(dump, "*XlaMustCompile_true*buffer-assignment.txt")))
            if not found:
                raise NoPrediction("XLA wrote no buffer assignment (its flags were read before this call)")
            allocations = xla_allocations(open(found[-1]).read())
        finally:
            if before is None:
                os.environ.pop("XLA_FLAGS", None)
            else:
                os.environ["XLA_FLAGS"] = before
            shutil.rmtree(dump, ignore_errors=True)
        predicted = sum(v for k, v in allocations.items() if k not in ("parameter", "constant"))
        same = self.jit_compile
        return {
            "method": "XLA's buffer assignment (--xla_dump_to) of tf.function(step, jit_compile=True)",
            "bytes": predicted,
            "compares_with": "every allocation but the parameters (params, inputs) and constants, "
            "which are resident before the step",
            "program": "tf.function(gradient step, jit_compile=True): XLA",
            "same_program": same,
            "fields": allocations,
            "categories": {k: v for k, v in allocations.items() if k not in ("parameter", "constant")},
            "note": None if same else "the cell runs tf.function without XLA; this is XLA's plan of the "
            "same step with jit_compile=True",
        }

    def split_vjp(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        if mode == "compiled":
            return None  # a tape cannot leave a tf.function (module docstring)
        import tensorflow as tf

        ops, device_name = self.ops, self._device_name

        def forward(params, inputs):
            with tf.device(device_name):
                tape = tf.GradientTape()
                with tape:
                    tape.watch(params)
                    loss = loss_fn(ops, params, inputs)
            return (loss, tape, params)

        def backward(state):
            loss, tape, params = state
            with tf.device(device_name):
                grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
                return _dense(tf, grads)

        return forward, backward

    def backward_detail(self, run_backward):
        """How the tape sums the gradients that reach one tensor from several uses: its
        VSpace's aggregate function gets all of them in one list (add_n), so they are
        all alive at once. A recording aggregate function is registered around the
        backward (then the default again): each call's count and bytes (shape x dtype).
        {"aggregation": {calls, gradients, bytes, largest: {count, bytes}, method}}."""
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import backprop

        default = backprop._default_vspace
        calls = []

        def aggregate(gradients):
            calls.append((len(gradients), sum(_dense_bytes(g) for g in gradients)))
            return default.aggregate_fn(gradients)

        pywrap_tfe.TFE_Py_RegisterVSpace(default._replace(aggregate_fn=aggregate))
        try:
            run_backward()
        finally:
            pywrap_tfe.TFE_Py_RegisterVSpace(default)
        summed = [c for c in calls if c[0] > 1]  # a single gradient is passed on as it is
        largest = max(summed, key=lambda c: c[1], default=(0, 0))
        return {"aggregation": {
            "calls": len(summed), "gradients": sum(c[0] for c in summed), "bytes": sum(c[1] for c in summed),
            "largest": {"count": largest[0], "bytes": largest[1]},
            "method": ("the tape's aggregate function (tensorflow.python.eager.backprop's VSpace) recorded: each "
                       "call sums, with one add_n, every gradient that reached one tensor, all alive at once; "
                       "bytes from shape and dtype"),
        }}

    def buffer_bytes(self, tree):
        """TF shows no buffer address: each tensor object counts once, by its shape
        and dtype."""
        from harness.frameworks.base import leaves

        return {id(t): int(t.shape.num_elements()) * t.dtype.size for t in leaves(tree)}

    # ---- CUDA: everything device-specific for TensorFlow is below --------------------
    def set_matmul_precision(self, device, precision):
        if device == "cpu":
            return super().set_matmul_precision(device, precision)
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
        return f"tf.config.experimental.enable_tensor_float_32_execution({precision == 'tf32'})"

    def device_memory_probe(self, device):
        if device != "cuda":
            return None  # get_memory_info('CPU:0') is unsupported (docs/design.md, Evidence)
        import tensorflow as tf

        return TensorflowGpuProbe(tf, self._device_name.lstrip("/"))


class TensorflowGpuProbe:
    """TF's GPU BFC allocator, from ``tf.config.experimental.get_memory_info``. All
    figures are absolute bytes in use (chunk sizes, 256 B rounded: an upper bound of
    live bytes); ``baseline_bytes`` is ``current`` at ``reset()``. ``reset_memory_stats``
    sets the peak to the current value, so the peak counts from ``reset()``. TF exposes
    no reserved (pool) figure. Reads synchronise the devices first."""

    peak_since_reset = True
    method = "tf.config.experimental.get_memory_info peak after reset_memory_stats"

    def __init__(self, tf, name="GPU:0"):
        self.tf, self.name = tf, name
        self.baseline_bytes = 0

    def _info(self):
        self.tf.test.experimental.sync_devices()
        return self.tf.config.experimental.get_memory_info(self.name)

    def reset(self):
        self.tf.test.experimental.sync_devices()
        self.tf.config.experimental.reset_memory_stats(self.name)
        self.baseline_bytes = self._info()["current"]

    def current_bytes(self):
        return self._info()["current"]

    def peak_bytes(self):
        return self._info()["peak"]


def _cuda_device_or_raise(tf):
    """"/GPU:0" when TF can use a GPU here (with memory growth on), else Unavailable."""
    if not tf.test.is_built_with_cuda():
        raise Unavailable("this TensorFlow build has no CUDA support (tensorflow-cpu); install tensorflow[and-cuda]")
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        raise Unavailable("TensorFlow is a CUDA build, but sees no GPU")
    for gpu in gpus:
        try:  # before the GPU is initialised; TF_FORCE_GPU_ALLOW_GROWTH does the same
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:
            pass  # already initialised (a second load in one process)
    return "/GPU:0"


def _hide_gpus(tf):
    """A cpu cell must not run on a GPU that TF would otherwise pick for every op."""
    if tf.config.list_physical_devices("GPU"):
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:
            pass  # already initialised: ops are still pinned with tf.device("/CPU:0")


# ---- threads ----------------------------------------------------------------------------
def _fix_threads(tf):
    """TF's intra-op and inter-op pools to GRADMEM_THREADS. Settable only before TF's
    runtime starts; a second load() in one process (tests) records what it has."""
    count = threads.thread_count()
    try:
        tf.config.threading.set_intra_op_parallelism_threads(count)
        tf.config.threading.set_inter_op_parallelism_threads(count)
    except RuntimeError:
        pass
    return {
        "threads": count,
        "tf.intra_op_parallelism_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "tf.inter_op_parallelism_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }


# ---- the op set -------------------------------------------------------------------------
def _dense(tf, grads):
    """tape.gradient gives IndexedSlices for gather: make every gradient a dense tensor."""
    return {k: tf.convert_to_tensor(g) for k, g in grads.items()}


def _axes(axis):
    return list(axis) if isinstance(axis, tuple) else axis


def _make_ops(tf):
    import types

    def like(value, other):
        """A Python number as a tensor of `other`'s dtype (tf.where does not convert)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return tf.constant(value, dtype=other.dtype)
        return value

    def where(cond, x, y):
        if isinstance(x, (int, float)):
            x = like(x, y)
        y = like(y, x)
        return tf.where(cond, x, y)

    def conv2d(x, w, stride=1, padding=0):
        # NHWC on the CPU (module docstring): NCHW -> NHWC, OIHW -> HWIO, and back.
        # "SAME" when it is exactly that padding (stride 1, odd square kernel k, padding
        # (k - 1) / 2), the form TF users write; otherwise the explicit list.
        k = w.shape[2]
        if padding == 0:
            pad = "VALID"
        elif stride == 1 and k == w.shape[3] and 2 * padding + 1 == k:
            pad = "SAME"
        else:
            pad = [[0, 0], [padding, padding], [padding, padding], [0, 0]]
        out = tf.nn.conv2d(
            tf.transpose(x, [0, 2, 3, 1]), tf.transpose(w, [2, 3, 1, 0]), strides=stride, padding=pad
        )
        return tf.transpose(out, [0, 3, 1, 2])

    def max_pool2d(x, size=2):
        # CPU max_pool is NHWC only; "VALID" drops a ragged edge, as torch does.
        out = tf.nn.max_pool2d(tf.transpose(x, [0, 2, 3, 1]), ksize=size, strides=size, padding="VALID")
        return tf.transpose(out, [0, 3, 1, 2])

    def upsample2d(x, scale=2):
        return tf.repeat(tf.repeat(x, scale, axis=2), scale, axis=3)

    return types.SimpleNamespace(
        add=lambda x, y: x + y,
        sub=lambda x, y: x - y,
        mul=lambda x, y: x * y,
        div=lambda x, y: x / y,
        neg=tf.math.negative,
        exp=tf.math.exp,
        log=tf.math.log,
        sqrt=tf.math.sqrt,
        tanh=tf.math.tanh,
        sigmoid=tf.math.sigmoid,
        relu=tf.nn.relu,
        sin=tf.math.sin,
        cos=tf.math.cos,
        matmul=tf.linalg.matmul,
        sum=lambda x, axis=None, keepdims=False: tf.reduce_sum(x, axis=_axes(axis), keepdims=keepdims),
        mean=lambda x, axis=None, keepdims=False: tf.reduce_mean(x, axis=_axes(axis), keepdims=keepdims),
        max=lambda x, axis=None, keepdims=False: tf.reduce_max(x, axis=_axes(axis), keepdims=keepdims),
        reshape=lambda x, shape: tf.reshape(x, list(shape)),
        permute_dims=lambda x, axes: tf.transpose(x, list(axes)),
        concat=lambda xs, axis=0: tf.concat(list(xs), axis=axis),
        stack=lambda xs, axis=0: tf.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=lambda x, indices, axis=0: tf.gather(x, indices, axis=axis),
        where=where,
        softmax=lambda x, axis=-1: tf.nn.softmax(x, axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: tf.reduce_logsumexp(x, axis=_axes(axis), keepdims=keepdims),
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: tf.math.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )


def xla_allocations(text):
    """{kind: bytes} of an XLA buffer-assignment dump: each ``allocation N: size S,
    <tags>:`` line filed under parameter, constant, temp (``preallocated-temp``),
    thread_local, output (``output`` or ``maybe-live-out``) or other."""
    import re

    totals = {}
    for size, tags in re.findall(r"^allocation \d+: size (\d+),?(.*):$", text, re.M):
        kind = ("parameter" if "parameter" in tags else "constant" if "constant" in tags
                else "temp" if "preallocated-temp" in tags else "thread_local" if "thread-local" in tags
                else "output" if ("output" in tags or "live-out" in tags) else "other")
        totals[kind] = totals.get(kind, 0) + int(size)
    return totals


def _dense_bytes(gradient):
    """Bytes of a gradient the tape aggregates: a dense tensor, or IndexedSlices' values."""
    values = getattr(gradient, "values", gradient)
    return int(values.shape.num_elements() or 0) * values.dtype.size
