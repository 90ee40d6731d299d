"""PyTensor (Theano's successor): the op set on ``pytensor.tensor``; CPU only.

A workload's ``loss(ops, params, inputs)`` is called once on symbolic tensors (static
shapes and dtypes taken from the first arrays it is given) to build a graph;
``pytensor.grad`` adds the gradient graph; ``pytensor.function`` compiles both into
one function, cached per shapes and dtypes. Compilation happens on the first call of
the step; ``adapter.last_compile_s`` holds its duration.

Modes. PyTensor has no eager execution: every graph is compiled. The two modes are
PyTensor's two ends of that spectrum:

- ``"compiled"``: ``FAST_RUN`` rewrites (fusion, in-place ops, BLAS, stability) run by
  the C virtual machine with C thunks (PyTensor's ``CVM`` mode, what Theano ran, and
  what the seed thread's Theano model measured). Intermediates are freed as soon as no
  later op needs them (``allow_gc``). PyTensor 3's own default ``FAST_RUN`` linker is
  Numba: ``PytensorAdapter(linker="numba")`` selects it (its first compile takes
  ~15 s even for chained_dot tiny, against ~5 s for the C one).
- ``"eager"``: ``FAST_COMPILE``: only the cheap rewrites (canonicalisation and what
  correctness needs: no fusion, no in-place ops, no BLAS specialisation), then each
  op's Python ``perform`` (NumPy) in the Python VM, op by op in graph order, freeing
  intermediates as it goes. It is the closest PyTensor comes to running the ops as
  written, like autograd: NumPy kernels, a Python loop around them. It compiles no C
  code (a C-thunk eager mode compiled one module per op signature: ~8 minutes for the
  contract test's op cases on an empty cache here). One rewrite is added
  (`_eager_mode`) so that every elementwise op is one NumPy call.

Compiled C code is cached on disk (``base_compiledir``). The worker sets
``PYTENSOR_FLAGS=base_compiledir=~/.cache/gradmem/pytensor`` (``environment``) so
every run shares one cache outside the repository; ``load()`` sets the same when
PyTensor is not imported yet. On an empty cache each new op signature costs a C
compile of seconds, so a cell's first step would time the compiler, not the step,
whenever the cache was new (docs/design.md, Evidence: "Compile caches").

float32: Python float constants in a graph take ``floatX``'s dtype, and with the
default ``floatX=float64`` ``x_f32 * 0.1`` is float64. The graph is built and compiled
with ``floatX`` set to the params' float dtype, so float32 stays float32.

Ops PyTensor lacks (3.0.7 removed ``tensor.nnet`` and ``signal.pool``) are built from
its primitives: ``conv2d`` is im2col (zero padding by ``set_subtensor``, strided
slices, ``stack``, one ``tensordot``), ``max_pool2d`` a ``reshape`` + ``max``,
``upsample2d`` a ``reshape`` + ``broadcast_to`` + ``reshape``. ``max``'s gradient goes
to every tied maximum (torch picks one, autograd splits it): gradients differ only at
ties. ``softmax`` is PyTensor's own op, inlined; ``logsumexp`` is shifted by the max,
because ``pt.logsumexp`` is ``log(sum(exp(x)))``, stable only after FAST_RUN's rewrites.
No OpFromGraph is left un-inlined: its forward would be compiled apart in PyTensor's
default mode (Numba), minutes of JIT under FAST_COMPILE.

``split_vjp``: the forward/backward cut is taken on the gradient graph after
PyTensor's canonicalize/stabilize/specialize rewrites (so that using only a tensor's
shape does not count as saving it). The forward function returns the loss and every
forward tensor the gradient graph reads (the residuals); the backward function takes
the params, inputs and residuals and returns the gradients. Only eager cells are split:
FAST_COMPILE runs each op's NumPy ``perform`` in graph order with no fusion, so the two
halves run the same ops as one function would. A compiled cell is one FAST_RUN
function returning the loss and the gradients, as PyTensor (and Theano) users write it:
FAST_RUN's fusion and in-place rewrites work across the whole step, and a split
would make every residual an output of its own.

Remat: only ``"none"``. PyTensor has no checkpoint API (its graph rewrites decide what
is kept; OpFromGraph is inlined here): ``checkpoint`` and ``chain`` are the plain call
and loop, and any other ``remat`` is Unavailable.

CUDA: none. PyTensor's own GPU backend (libgpuarray) is gone; it reaches GPUs only
through its JAX or PyTorch linkers, which would measure those frameworks instead.
"""

import os
import sys
import time
import types

from harness.choices import OPTIMIZERS, check_choice
from harness.frameworks import remat as remat_lib
from harness.frameworks.base import Adapter, Unavailable, im2col_conv2d

LINKERS = ("cvm", "numba")


def default_compiledir():
    """Where PyTensor's compiled modules go: one cache per user, outside the repo."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "gradmem", "pytensor")


class PytensorAdapter(Adapter):
    name = "pytensor"
    module = "pytensor"
    distributions = ("pytensor", "numpy", "scipy", "numba")
    arrays_are_numpy = True
    # `pip install` of a checkout builds its one Cython extension (scan_perform) with the
    # C compiler PyTensor needs anyway: rel-3.0.1 installed from `git archive` in 49 s
    installs_from_source = True
    modes = ("eager", "compiled")
    compiled_as = "pytensor.function, FAST_RUN rewrites, C VM linker (CVM)"
    eager_as = "pytensor.function in FAST_COMPILE: each op's NumPy perform in the Python VM"
    #: set by the worker before the process imports PyTensor
    environment = {"PYTENSOR_FLAGS": f"base_compiledir={default_compiledir()}"}

    def __init__(self, linker="cvm"):
        self.linker = check_choice("pytensor linker", linker, LINKERS)
        self.last_compile_s = None
        self.last_function = None  # the last compiled joint function, for inspection

    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        self.check_remat(remat)  # "none" only (no checkpoint API)
        if device != "cpu":
            raise Unavailable("PyTensor has no CUDA backend of its own (only via its JAX/PyTorch linkers)")
        _use_project_compiledir()
        import warnings

        import pytensor

        # Said on the first C compile: no BLAS library to link. PyTensor's C code then
        # calls BLAS through NumPy's C API (NumPy's own OpenBLAS), recorded in settings().
        warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS", category=UserWarning)

        from harness.frameworks.autograd import fix_numpy_blas_threads

        if mode == "compiled" and self.linker == "cvm" and not pytensor.config.cxx:
            raise Unavailable("PyTensor's C linker needs a C++ compiler (pytensor.config.cxx is empty)")
        # PyTensor's C BLAS calls go through NumPy's C API (no BLAS of its own linked
        # here), and eager runs NumPy kernels: NumPy's pool is the one to fix.
        self._settings = fix_numpy_blas_threads()
        self._settings.update({
            "pytensor.mode": {"eager": "FAST_COMPILE + numpy_elemwise rewrite, Python VM",
                              "compiled": "CVM (FAST_RUN, C VM)" if self.linker == "cvm" else "NUMBA (FAST_RUN)"}[mode],
            "pytensor.base_compiledir": str(pytensor.config.base_compiledir),
            "pytensor.blas__ldflags": pytensor.config.blas__ldflags or "(none: NumPy C-API BLAS)",
        })  # fmt: skip
        self.ops = _make_ops()
        self.mode = mode
        return self

    def from_numpy(self, tree, device="cpu"):
        if device != "cpu":
            raise Unavailable("PyTensor has no CUDA backend of its own")
        return dict(tree)

    # ---- gradients ----------------------------------------------------------------
    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        compiled = {}

        def step(params, inputs):
            key = _signature(params, inputs)
            if key not in compiled:
                compiled[key] = self._compile_joint(loss_fn, params, inputs, mode)
            fn = compiled[key]
            loss, *grads = fn(*params.values(), *inputs.values())
            return loss, dict(zip(params, grads))

        return step

    def split_vjp(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        if mode == "compiled":
            return None  # one FAST_RUN function for loss and gradients (module docstring)
        compiled = {}

        def forward(params, inputs):
            key = _signature(params, inputs)
            if key not in compiled:
                compiled[key] = self._compile_split(loss_fn, params, inputs, mode)
            fwd, bwd = compiled[key]
            args = (*params.values(), *inputs.values())
            loss, *saved = fwd(*args)
            return (loss, saved, args, list(params), bwd)

        def backward(state):
            _, saved, args, names, bwd = state
            return dict(zip(names, bwd(*args, *saved)))

        return forward, backward

    # ---- the framework's own prediction (harness/measure/prediction.py) ----------------
    def predict_step_memory(self, loss_fn, params, inputs, mode):
        """PyTensor's profiler: the cell's step compiled again with ``profile`` and
        ``profile_memory`` on, run once (the flags must hold at call time too, or no
        output shape is recorded), and its memory summary's simulated peak read."""
        import io
        import re

        import pytensor

        kept = self.last_function, self.last_compile_s  # the measured step's, for inspection
        with pytensor.config.change_flags(profile=True, profile_memory=True):
            fn = self._compile_joint(loss_fn, params, inputs, mode)
            fn(*params.values(), *inputs.values())
        self.last_function, self.last_compile_s = kept
        text = io.StringIO()
        fn.profile.summary_memory(text)
        text = text.getvalue()

        def kib(heading, pattern=r"CPU: (\d+)KB(?: \((\d+)KB\))?"):
            found = re.search(re.escape(heading) + r"\s*\n\s*" + pattern, text)
            if not found:
                raise ValueError(f"no {heading!r} in PyTensor's memory summary")
            return [int(g) * 1024 for g in found.groups() if g is not None]

        current = kib("Max peak memory with current setting")
        no_inplace = kib("Max peak memory with current setting and PyTensor flag optimizer_excluding=inplace")
        no_gc = kib("Max peak memory if allow_gc=False (linker don't make a difference)")
        return {
            "method": "pytensor ProfileStats.summary_memory() of the step compiled with profile_memory, "
            "'Max peak memory with current setting', CPU, in the order the profiled run executed",
            "bytes": current[0],
            "compares_with": "the simulated peak of the nodes' outputs (graph inputs excluded), read "
            "in KiB",
            "program": self.compiled_as if mode == "compiled" else self.eager_as,
            "same_program": True,
            "fields": {"current_setting_bytes": current[0],
                       "current_setting_toposort_order_bytes": current[-1],
                       "without_inplace_bytes": no_inplace[0], "allow_gc_false_bytes": no_gc[0]},
            "note": "the profiled run is the same graph under PyTensor's Stack VM (the C VM cannot "
            "profile memory); sparse variables are ignored",
        }

    def saved_activation_bytes(self, state, params, inputs):
        """The split's forward function returns, as NumPy arrays, exactly the forward
        tensors its backward function reads (`_residuals`): those are counted."""
        _, saved, *_ = state
        outside = set(self.buffer_bytes([params, inputs]))
        found = self.buffer_bytes(saved)
        method = ("the arrays the compiled forward returns for the compiled backward (the tensors the "
                  "gradient graph reads), counted once per buffer, params and inputs excluded")
        return sum(v for k, v in found.items() if k not in outside), method

    def optimizer(self, kind, params, lr=1e-3):
        """One SGD or Adam step as a compiled PyTensor function (in the mode given to
        load()), compiled on the first call; Adam's moments live between calls as
        NumPy arrays, as the functional default's do. Same update as the default."""
        check_choice("optimizer", kind, OPTIMIZERS)
        return _CompiledUpdate(self, kind, lr)

    # ---- graph building -----------------------------------------------------------
    def _pytensor_mode(self, mode):
        if mode == "compiled":
            return "CVM" if self.linker == "cvm" else "NUMBA"
        return _eager_mode()

    def _symbolic(self, loss_fn, params, inputs):
        import pytensor
        import pytensor.tensor as pt

        p_sym = {k: pt.tensor(k, dtype=v.dtype, shape=v.shape) for k, v in params.items()}
        i_sym = {k: pt.tensor(k, dtype=v.dtype, shape=v.shape) for k, v in inputs.items()}
        loss = pt.as_tensor_variable(loss_fn(self.ops, p_sym, i_sym))
        grads = pytensor.grad(loss, list(p_sym.values()), disconnected_inputs="ignore")
        return list(p_sym.values()), list(i_sym.values()), loss, grads

    def _compile_joint(self, loss_fn, params, inputs, mode):
        import pytensor

        with pytensor.config.change_flags(floatX=_float_dtype(params)):
            p_sym, i_sym, loss, grads = self._symbolic(loss_fn, params, inputs)
            start = time.perf_counter()
            fn = pytensor.function(
                p_sym + i_sym, [loss, *grads], mode=self._pytensor_mode(mode), on_unused_input="ignore"
            )
            self.last_compile_s = time.perf_counter() - start
        self.last_function = fn
        return fn

    def _compile_split(self, loss_fn, params, inputs, mode):
        import pytensor
        from pytensor.graph.rewriting.utils import rewrite_graph

        with pytensor.config.change_flags(floatX=_float_dtype(params)):
            p_sym, i_sym, loss, grads = self._symbolic(loss_fn, params, inputs)
            start = time.perf_counter()
            loss, *grads = rewrite_graph(
                [loss, *grads], include=("canonicalize", "stabilize", "specialize"), clone=True
            )
            roots = _rewritten_roots(p_sym + i_sym, [loss, *grads])
            saved = _residuals(loss, grads, roots)
            pmode = self._pytensor_mode(mode)
            fwd = pytensor.function(roots, [loss, *saved], mode=pmode, on_unused_input="ignore")
            bwd = pytensor.function(roots + saved, grads, mode=pmode, on_unused_input="ignore")
            self.last_compile_s = time.perf_counter() - start
        return fwd, bwd


class _CompiledUpdate:
    def __init__(self, adapter, kind, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.adapter, self.kind, self.lr = adapter, kind, lr
        self.b1, self.b2, self.eps = b1, b2, eps
        self.fn, self.t, self.m, self.v = None, 0, None, None

    def _compile(self, params):
        import pytensor
        import pytensor.tensor as pt

        dtype = _float_dtype(params)
        with pytensor.config.change_flags(floatX=dtype):
            sym = {name: [pt.tensor(f"{name}_{role}", dtype=v.dtype, shape=v.shape) for role in "pgmv"]
                   for name, v in params.items()}  # fmt: skip
            if self.kind == "sgd":
                inputs = [s[0] for s in sym.values()] + [s[1] for s in sym.values()]
                outputs = [p - g * self.lr for p, g, _, _ in sym.values()]
            else:
                # bias corrections 1 - b^t as inputs, so that one function serves every t
                c1, c2 = pt.scalar("c1", dtype=dtype), pt.scalar("c2", dtype=dtype)
                inputs = [x for s in sym.values() for x in s] + [c1, c2]
                outputs = []
                for p, g, m, v in sym.values():
                    m = m * self.b1 + g * (1 - self.b1)
                    v = v * self.b2 + g * g * (1 - self.b2)
                    step = (m / c1) * self.lr / (pt.sqrt(v / c2) + self.eps)
                    outputs += [p - step, m, v]
            mode = self.adapter._pytensor_mode(self.adapter.mode)
            return pytensor.function(inputs, outputs, mode=mode)

    def state_arrays(self):
        """Adam's moments (none for SGD, none before the first step)."""
        return [*(self.m or {}).values(), *(self.v or {}).values()]

    def __call__(self, params, grads):
        import numpy as np

        names = list(params)
        if self.fn is None:
            self.fn = self._compile(params)
        if self.kind == "sgd":
            return dict(zip(names, self.fn(*params.values(), *(grads[k] for k in names))))
        self.t += 1
        if self.m is None:
            self.m = {k: np.zeros_like(grads[k]) for k in names}
            self.v = {k: np.zeros_like(grads[k]) for k in names}
        dtype = grads[names[0]].dtype
        args = [a for k in names for a in (params[k], grads[k], self.m[k], self.v[k])]
        corrections = [np.asarray(1 - b**self.t, dtype=dtype) for b in (self.b1, self.b2)]
        out = self.fn(*args, *corrections)
        new = {}
        for i, k in enumerate(names):
            new[k], self.m[k], self.v[k] = out[3 * i : 3 * i + 3]
        return new


_EAGER_MODE = []


def _eager_mode():
    """FAST_COMPILE, plus one rewrite so that every Elemwise runs as one NumPy call.

    FAST_COMPILE runs each op's Python ``perform``. Elemwise's calls the NumPy ufunc of
    its scalar op, but when the op has none for its number of inputs it loops over the
    elements in Python (``np.frompyfunc``): ~100x slower than NumPy, and failing beyond
    32 operands. That happens for ``second`` (fill: how ``pytensor.grad`` broadcasts
    the gradient of a sum) and for the n-input Add with which ``pytensor.grad`` sums
    the contributions of a tensor used n times (chained_dot small: x is used 50 times).
    The rewrite, run after all of FAST_COMPILE's, writes those as NumPy would run them:
    n-ary Add and Mul as a chain of binary ones, in order; ``second(x, y)`` as an
    ``alloc`` of y in the broadcast shape. Nothing else changes.
    """
    if not _EAGER_MODE:
        import pytensor.tensor as pt
        from pytensor.compile.mode import FAST_COMPILE
        from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter
        from pytensor.scalar import basic as ps
        from pytensor.tensor.elemwise import Elemwise
        from pytensor.tensor.extra_ops import broadcast_shape

        @node_rewriter([Elemwise])
        def numpy_elemwise(fgraph, node):
            scalar_op = node.op.scalar_op
            if isinstance(scalar_op, ps.Second):
                x, y = node.inputs
                return [pt.alloc(y, *broadcast_shape(x, y))]
            if len(node.inputs) <= 2 or not isinstance(scalar_op, (ps.Add, ps.Mul)):
                return None
            combine = pt.add if isinstance(scalar_op, ps.Add) else pt.mul
            total = node.inputs[0]
            for term in node.inputs[1:]:
                total = combine(total, term)
            return [total]

        rewrite = dfs_rewriter(numpy_elemwise, name="numpy_elemwise")
        _EAGER_MODE.append(FAST_COMPILE.register((rewrite, 99)))
    return _EAGER_MODE[0]


def _residuals(loss, grads, roots):
    """The forward tensors (ancestors of the loss) that the gradient graph reads."""
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import ancestors, applys_between

    forward = set(ancestors([loss]))
    saved, seen = [], set(roots)
    for node in applys_between(roots, grads):
        if any(out in forward for out in node.outputs):
            continue  # a forward op: it runs in the forward function
        for var in node.inputs:
            if var in forward and var not in seen and not isinstance(var, Constant):
                seen.add(var)
                saved.append(var)
    return saved


def _signature(params, inputs):
    return tuple((k, str(v.dtype), tuple(v.shape)) for tree in (params, inputs) for k, v in tree.items())


def _float_dtype(params):
    """floatX for the graph: the params' float dtype (they share one)."""
    kinds = {str(v.dtype) for v in params.values() if v.dtype.kind == "f"}
    if len(kinds) != 1:
        raise ValueError(f"params must share one float dtype, got {sorted(kinds) or 'none'}")
    return kinds.pop()


def _use_project_compiledir():
    """Point PyTensor at gradmem's compile cache unless the user chose one."""
    if "pytensor" in sys.modules:
        return  # too late: PyTensor reads its flags on import
    flags = os.environ.get("PYTENSOR_FLAGS", "")
    if "compiledir" not in flags:
        ours = PytensorAdapter.environment["PYTENSOR_FLAGS"]
        os.environ["PYTENSOR_FLAGS"] = f"{ours},{flags}" if flags else ours


def _rewritten_roots(roots, outputs):
    """`roots` as the rewritten graph `outputs` holds them. rewrite_graph(clone=True)
    keeps the input variables from PyTensor 3.0.3 on; 3.0.0-3.0.2 clone them too, and a
    function over the old ones misses every input ("MissingInputError: Input 0 (bout)
    ... was not provided"). Matched by name (the symbols are named for their arrays)."""
    try:
        from pytensor.graph.traversal import graph_inputs
    except ImportError:  # before 3.0.x moved it
        from pytensor.graph.basic import graph_inputs
    by_name = {v.name: v for v in graph_inputs(outputs) if v.name}
    return [by_name.get(v.name, v) for v in roots]


def _static_shape(x):
    shape = x.type.shape
    if any(s is None for s in shape):
        raise ValueError(f"PyTensor op needs a static shape, got {shape}")
    return shape


def _make_ops():
    """The op-set namespace on pytensor.tensor (imported on first load)."""
    import pytensor.tensor as pt
    from pytensor.gradient import disconnected_grad
    from pytensor.tensor.special import Softmax

    def softmax(x, axis=-1):
        # PyTensor's own Softmax (its hand-written pullback), inlined: not inlined, an
        # OpFromGraph's forward is compiled apart in PyTensor's default mode (Numba
        # in 3.x), which under FAST_COMPILE costs minutes of JIT and mixes backends.
        try:
            return Softmax(axis=(axis % x.type.ndim,), inline=True)(x)
        except TypeError:  # PyTensor 3.0.0: Softmax is a plain Op (nothing to inline), as users call it
            return pt.special.softmax(x, axis=axis)

    def logsumexp(x, axis=-1, keepdims=False):
        # pt.logsumexp is log(sum(exp(x))): stable only after FAST_RUN's stabilize
        # rewrite, so it overflows in eager mode. Shift by the (constant) max instead.
        shift = disconnected_grad(pt.max(x, axis=axis, keepdims=True))
        out = pt.log(pt.sum(pt.exp(x - shift), axis=axis, keepdims=True)) + shift
        return out if keepdims else pt.squeeze(out, axis=axis)

    def pad(x, p):
        # zeros + set_subtensor: pt.pad is an OpFromGraph (see softmax).
        n, c, h, w = _static_shape(x)
        padded = pt.zeros((n, c, h + 2 * p, w + 2 * p), dtype=x.dtype)
        return pt.set_subtensor(padded[:, :, p : p + h, p : p + w], x)

    def conv2d(x, w, stride=1, padding=0):
        # PyTensor 3 has no neural-network conv (tensor.nnet was removed;
        # signal.convolve2d is one scipy call per channel pair): im2col from its
        # primitives, on the zero-padded input.
        if padding:
            x = pad(x, padding)
        return im2col_conv2d(pt, x, w, stride, _static_shape)

    def max_pool2d(x, size=2):
        n, c, h, w = _static_shape(x)
        ho, wo = h // size, w // size
        if (h, w) != (ho * size, wo * size):  # floor, as torch: drop the ragged edge
            x = x[:, :, : ho * size, : wo * size]
        return pt.max(pt.reshape(x, (n, c, ho, size, wo, size)), axis=(3, 5))

    def upsample2d(x, scale=2):
        n, c, h, w = _static_shape(x)
        tiled = pt.broadcast_to(pt.reshape(x, (n, c, h, 1, w, 1)), (n, c, h, scale, w, scale))
        return pt.reshape(tiled, (n, c, h * scale, w * scale))

    return types.SimpleNamespace(
        add=pt.add,
        sub=pt.sub,
        mul=pt.mul,
        div=pt.true_div,
        neg=pt.neg,
        exp=pt.exp,
        log=pt.log,
        sqrt=pt.sqrt,
        tanh=pt.tanh,
        sigmoid=pt.sigmoid,
        # switch, not maximum: the gradient is exactly 0 at 0, as the contract says.
        relu=lambda x: pt.switch(pt.gt(x, 0), x, 0),
        sin=pt.sin,
        cos=pt.cos,
        matmul=pt.matmul,
        sum=lambda x, axis=None, keepdims=False: pt.sum(x, axis=axis, keepdims=keepdims),
        mean=lambda x, axis=None, keepdims=False: pt.mean(x, axis=axis, keepdims=keepdims),
        max=lambda x, axis=None, keepdims=False: pt.max(x, axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: pt.reshape(x, shape),
        permute_dims=lambda x, axes: pt.transpose(x, axes),
        concat=lambda xs, axis=0: pt.concatenate(list(xs), axis=axis),
        stack=lambda xs, axis=0: pt.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=lambda x, indices, axis=0: pt.take(x, indices, axis=axis),
        where=pt.where,
        softmax=softmax,
        logsumexp=logsumexp,
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: pt.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )
