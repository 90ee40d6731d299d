"""HIPS autograd: the op set on ``autograd.numpy``; eager only, CPU only.

autograd traces NumPy calls and keeps the whole graph (every VJP closure holds the
arguments and result of its op) until the gradient has been computed: that is the
memory behaviour the #219 thread measured, and what this adapter lets us measure.

Where autograd lacks an op, it is built here from autograd's own primitives, so
autograd's VJPs (and their memory) are what runs:

- ``conv2d``: im2col from ``pad``, strided slices, ``stack`` and one ``tensordot``;
- ``max_pool2d``: ``reshape`` into windows and ``max`` over them;
- ``upsample2d``: ``reshape`` + ``broadcast_to`` + ``reshape``;
- ``softmax``: ``exp(x - logsumexp(x))`` (autograd has no softmax);
- ``take`` with an axis: advanced indexing (``anp.take`` has no VJP).

Three of autograd 1.9.1's VJPs turn float32 gradients into float64 under NumPy 2
(NEP 50: a NumPy int64 or float64 array is no longer "weak"): ``max`` divides by an
int64 count (HIPS/autograd#199, open since 2017), ``where`` fills with
``zeros(shape)`` (float64), and ``mean`` divides by an int64 count. A float32 run
would then hold float64 gradients (twice the bytes), and ``check`` would reject it.
So ``max`` and ``where`` are adapter primitives whose VJPs are autograd's own with
the dtype fixed (the fix proposed in #199), and ``mean`` is ``sum(x) / n`` with a
Python ``n``. tests/frameworks/test_autograd_adapter.py checks that the upstream
bug is still there, so these workarounds go when autograd fixes it.

Remat (``load(..., remat=)``): ``"native"`` = ``autograd.checkpoint(f)`` (present in
1.9.1) on each ``checkpoint`` segment and each of the ceil(sqrt(n)) segments of a
``chain``. It is a primitive whose VJP re-traces ``f``; autograd boxes only top-level
arguments, so a segment's dicts are passed flattened (remat.flat_checkpoint). Beware:
autograd builds a node's VJP *when the node is recorded* (``VJPNode.__init__`` calls
the vjpmaker), and checkpoint's vjpmaker is ``make_vjp(f, argnum)(*args)``: the
re-trace happens in the forward pass, once per differentiated argument, and its whole
tape is kept until the backward. So autograd's checkpoint recomputes but keeps every
segment's insides (k times over for k traced arguments): it does not lower the peak
(measured at small, float32: 1.05x to 3x the peak of "none", worst on unet whose
segments have 5-8 array arguments). It is offered as it is: that is what autograd
users get.

CUDA: none. autograd computes with NumPy on the CPU (it has no device support).
"""

import glob
import math
import os
import types

from harness.frameworks import remat as remat_lib
from harness.frameworks import threads
from harness.frameworks.base import Adapter, Unavailable, im2col_conv2d


class AutogradAdapter(Adapter):
    name = "autograd"
    module = "autograd"
    preload = ("autograd.numpy", "autograd.scipy.special")  # SciPy: 1.3 s of the 1.5 s import
    distributions = ("autograd", "numpy")
    arrays_are_numpy = True
    installs_from_source = True  # pure Python: `bisect --repo` installs a commit with pip
    adapter_requires = ("scipy",)  # autograd.scipy.special (expit, logsumexp)
    era_requires = {"numpy<1.24": ("future",)}  # 2017's autograd.core imports future.utils
    modes = ("eager",)
    compiled_as = ""
    no_predictor = "HIPS autograd traces and runs at once; nothing plans a step before it runs"
    eager_as = "autograd.make_vjp: the loss traced op by op on NumPy, then its VJP"
    remats = ("none", "native")
    # The breakdown's saved activations: autograd keeps them inside the VJP closures of
    # its graph's nodes, with no API to list them, so the breakdown takes the resident
    # bytes live at the end of forward above the step's start, and says so.
    saved_activations_from_rss = True

    def load(self, device="cpu", mode="eager", remat="none"):
        self.check_device(device)
        self.check_mode(mode)
        strategy, _ = self.check_remat(remat)
        if device != "cpu":
            raise Unavailable("HIPS autograd computes with NumPy on the CPU; it has no CUDA support")
        era = api_era()  # before the first import of autograd (the 2017 API needs a shim on 3.11)
        self._settings = fix_numpy_blas_threads()
        self._settings["remat"] = "native (autograd.checkpoint)" if strategy == "native" else "none"
        self._settings["autograd.api"] = ERA_TEXT[era]
        if era == ERA_2017:
            self._settings["autograd.api_shims"] = ERA_2017_SHIMS
        self.ops = _make_ops()
        if strategy == "native":
            import autograd

            checkpoint = remat_lib.flat_checkpoint(lambda g, *flat: autograd.checkpoint(g)(*flat))
            self.ops.checkpoint, self.ops.chain = checkpoint, remat_lib.chain_of(checkpoint)
        return self

    def commit_requirements(self, repo, commit):
        """(name, pins) of the environment a commit of autograd's repository needs, or
        None for today's pins: a 2017 commit (no autograd/extend.py) gets ERA_2017_PINS."""
        import subprocess

        done = subprocess.run(["git", "-C", repo, "cat-file", "-e", f"{commit}:autograd/extend.py"],
                              capture_output=True)
        return None if done.returncode == 0 else ("2017", ERA_2017_PINS)

    def from_numpy(self, tree, device="cpu"):
        if device != "cpu":
            raise Unavailable("HIPS autograd has no CUDA support")
        return dict(tree)

    def value_and_grad(self, loss_fn, mode="eager"):
        self.check_mode(mode)
        from autograd import value_and_grad

        ops = self.ops
        return value_and_grad(lambda params, inputs: loss_fn(ops, params, inputs))

    def split_vjp(self, loss_fn, mode="eager"):
        """forward traces the loss and keeps autograd's graph (the VJP closure);
        backward seeds it with a one of the loss's dtype."""
        self.check_mode(mode)
        from autograd import make_vjp

        ops = self.ops
        if api_era() == ERA_2017:
            return _split_vjp_2017(make_vjp, ops, loss_fn)
        from autograd.extend import vspace

        def forward(params, inputs):
            vjp, loss = make_vjp(lambda p: loss_fn(ops, p, inputs))(params)
            return (loss, vjp)

        def backward(state):
            loss, vjp = state
            return vjp(vspace(loss).ones())

        return forward, backward


def fix_numpy_blas_threads(count=None):
    """Set NumPy's BLAS pool to GRADMEM_THREADS; {setting: value} for settings().

    NumPy has no thread API of its own; its wheels bundle OpenBLAS (symbols prefixed
    ``scipy_openblas``), whose set/get functions are called here through ctypes (a
    second dlopen of a loaded library is the same instance). The worker also sets
    OPENBLAS_NUM_THREADS before start (threads.thread_environment()). Shared by the
    NumPy-based adapters: autograd, pytensor, reference.
    """
    import ctypes

    import numpy

    count = threads.thread_count() if count is None else count
    found = {"threads": count, "numpy.blas": "unknown (no bundled OpenBLAS found)"}
    libs = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "lib*openblas*.so*")))
    for path in libs:
        lib = ctypes.CDLL(path)
        # NumPy 2 bundles scipy_openblas64_; NumPy 1.23 (2017 autograd's era) openblas64_
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter(ctypes.c_int(count))
                found["numpy.blas"] = os.path.basename(path)
                found["numpy.blas_threads"] = int(getter())
                # the kernels OpenBLAS runs: its CPU detection, or $OPENBLAS_CORETYPE where
                # set (Haswell's AVX2 kernels on an AVX-512 CPU take ~1.4x the time)
                corename = getattr(lib, f"{prefix}_get_corename{suffix}", None)
                if corename is not None:
                    corename.restype = ctypes.c_char_p
                    found["numpy.blas_core"] = corename().decode()
                return found
    return found


def _make_ops():
    """The op-set namespace; built on first load so importing this module stays cheap."""
    import autograd.numpy as anp

    if api_era() == ERA_2017:
        expit, logsumexp, where, amax = _era_2017_ops(anp)
    else:
        from autograd.scipy.special import expit, logsumexp

        where, amax = _dtype_preserving_primitives()

    def mean(x, axis=None, keepdims=False):
        # sum / Python int: autograd's own mean VJP divides by an int64 (float64 grads).
        n = math.prod(anp.shape(x)) if axis is None else math.prod(
            anp.shape(x)[a] for a in ((axis,) if isinstance(axis, int) else axis)
        )
        return anp.sum(x, axis=axis, keepdims=keepdims) / n

    def take(x, indices, axis=0):
        # anp.take has no VJP; indexing does (its VJP scatter-adds with np.add.at).
        axis = axis % anp.ndim(x)
        return x[(slice(None),) * axis + (indices,)]

    def softmax(x, axis=-1):
        return anp.exp(x - logsumexp(x, axis=axis, keepdims=True))

    def conv2d(x, w, stride=1, padding=0):
        # autograd has no conv2d (autograd.scipy.signal.convolve loops in Python over
        # channel pairs: far too slow for U-Net): im2col from autograd primitives.
        if padding:
            p = padding
            x = anp.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), mode="constant")
        return im2col_conv2d(anp, x, w, stride, anp.shape)

    def max_pool2d(x, size=2):
        n, c, h, w = anp.shape(x)
        ho, wo = h // size, w // size
        if (h, w) != (ho * size, wo * size):  # floor, as torch: drop the ragged edge
            x = x[:, :, : ho * size, : wo * size]
        return amax(anp.reshape(x, (n, c, ho, size, wo, size)), axis=(3, 5))

    def upsample2d(x, scale=2):
        n, c, h, w = anp.shape(x)
        tiled = anp.broadcast_to(anp.reshape(x, (n, c, h, 1, w, 1)), (n, c, h, scale, w, scale))
        return anp.reshape(tiled, (n, c, h * scale, w * scale))

    return types.SimpleNamespace(
        add=anp.add,
        sub=anp.subtract,
        mul=anp.multiply,
        div=anp.true_divide,
        neg=anp.negative,
        exp=anp.exp,
        log=anp.log,
        sqrt=anp.sqrt,
        tanh=anp.tanh,
        sigmoid=expit,
        # x * (x > 0): gradient exactly 0 at 0 (anp.maximum's VJP gives 0.5 at ties).
        relu=lambda x: x * (x > 0),
        sin=anp.sin,
        cos=anp.cos,
        matmul=anp.matmul,
        sum=lambda x, axis=None, keepdims=False: anp.sum(x, axis=axis, keepdims=keepdims),
        mean=mean,
        max=lambda x, axis=None, keepdims=False: amax(x, axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: anp.reshape(x, shape),
        permute_dims=lambda x, axes: anp.transpose(x, axes),
        concat=lambda xs, axis=0: anp.concatenate(list(xs), axis=axis),
        stack=lambda xs, axis=0: anp.stack(list(xs), axis=axis),
        getitem=lambda x, key: x[key],
        take=take,
        where=where,
        softmax=softmax,
        logsumexp=lambda x, axis=-1, keepdims=False: logsumexp(x, axis=axis, keepdims=keepdims),
        conv2d=conv2d,
        max_pool2d=max_pool2d,
        upsample2d=upsample2d,
        cumsum=lambda x, axis: anp.cumsum(x, axis=axis),
        checkpoint=remat_lib.checkpoint,
        chain=remat_lib.chain,
    )


def _dtype_preserving_primitives():
    """`where` and `max` as autograd primitives whose VJPs are autograd 1.9.1's own,
    except that they keep the gradient's dtype (see the module docstring)."""
    import numpy as onp
    from autograd.extend import defvjp, primitive
    import autograd.numpy as anp
    from autograd.numpy.numpy_vjps import repeat_to_match_shape, unbroadcast_f

    @primitive
    def where(cond, x, y):
        return onp.where(cond, x, y)

    # autograd's: anp.where(c, g, anp.zeros(g.shape)) -- float64 zeros, no unbroadcast.
    # A Python 0.0 is weak under NEP 50, so g's dtype is kept.
    defvjp(
        where,
        None,
        lambda ans, c, x, y: unbroadcast_f(x, lambda g: anp.where(c, g, 0.0)),
        lambda ans, c, x, y: unbroadcast_f(y, lambda g: anp.where(c, 0.0, g)),
    )

    @primitive
    def amax(x, axis=None, keepdims=False):
        return onp.max(x, axis=axis, keepdims=keepdims)

    def amax_vjp(ans, x, axis=None, keepdims=False):
        # autograd's grad_chooser: ties share the gradient equally. The count of ties is
        # cast to x's dtype (autograd divides by the int64 count: float64 result).
        shape, dtype = anp.shape(x), anp.result_type(x)

        def vjp(g):
            g_repeated, _ = repeat_to_match_shape(g, shape, dtype, axis, keepdims)
            chosen = x == repeat_to_match_shape(ans, shape, dtype, axis, keepdims)[0]
            count = onp.sum(chosen, axis=axis, keepdims=True).astype(dtype)
            return g_repeated * chosen / count

        return vjp

    defvjp(amax, amax_vjp)
    return where, amax


# ---- autograd's API eras -------------------------------------------------------------
# HIPS autograd #219 (May 2017) measured autograd at 3d018e8; `harness bisect --repo`
# and tools/asv_framework.py install such commits. Until autograd.extend appeared (1.2,
# Nov 2017) primitives were `autograd.core.primitive` objects whose VJPs were
# registered as `fun.defvjp(lambda g, ans, vs, gvs, *args: ..., argnum=i)`, make_vjp
# returned the output *node* (not its value), vspaces had no ones(), and
# autograd.scipy.special had no expit (logsumexp sat in scipy.misc, gone in SciPy 1.3).
# The era is read from the installed package's files, without importing it: a 2017
# autograd does not import on Python 3.11 until inspect.getargspec is restored.
ERA_EXTEND, ERA_2017 = "extend", "2017"
ERA_TEXT = {
    ERA_EXTEND: "autograd.extend (1.2+): primitive/defvjp(fun, *vjpmakers)",
    ERA_2017: "2017 autograd.core: primitive objects, fun.defvjp(g, ans, vs, gvs, ...); make_vjp returns the node",
}
# The newest releases a 2017 autograd imports with on Python 3.11, resolved by trying
# (docs/seeds.md): NumPy 1.24 removed np.int (2017's numpy_wrapper uses it), so 1.23.5;
# SciPy 1.15.3 is the newest that accepts NumPy 1.23.5 (1.16 needs >= 1.25.2); future
# (2017's core imports future.utils) 1.0.0. gradmem's own code runs on NumPy 1.23.
ERA_2017_PINS = ("numpy==1.23.5", "scipy==1.15.3", "future==1.0.0")
ERA_2017_SHIMS = (
    "inspect.getargspec restored from getfullargspec (removed in Python 3.11; imported by 2017's "
    "convenience_wrappers); expit and logsumexp built from autograd.numpy primitives (2017's "
    "autograd.scipy.special has no expit; its logsumexp needs scipy.misc.logsumexp, gone in SciPy 1.3); "
    "where and max are autograd's own (2017's VJPs, under NumPy 1.x casting)"
)


def api_era():
    """ERA_EXTEND or ERA_2017 for the autograd on the path (no import of it); installs
    the Python 3.11 shim a 2017 autograd needs before it is imported."""
    import importlib.util

    spec = importlib.util.find_spec("autograd")
    if spec is None or not spec.submodule_search_locations:
        return ERA_EXTEND  # not installed: load() fails on import with autograd's own error
    package = list(spec.submodule_search_locations)[0]
    if os.path.exists(os.path.join(package, "extend.py")):
        return ERA_EXTEND
    _restore_getargspec()
    return ERA_2017


def _restore_getargspec():
    import collections
    import inspect

    if hasattr(inspect, "getargspec"):
        return
    arg_spec = collections.namedtuple("ArgSpec", "args varargs keywords defaults")

    def getargspec(func):
        full = inspect.getfullargspec(func)
        return arg_spec(full.args, full.varargs, full.varkw, full.defaults)

    inspect.getargspec = getargspec


def _era_2017_ops(anp):
    """expit, logsumexp, where, max for a 2017 autograd, from its numpy primitives."""

    def expit(x):
        return 1.0 / (1.0 + anp.exp(-x))

    def logsumexp(x, axis=-1, keepdims=False):
        top = anp.max(x, axis=axis, keepdims=True)  # stop-free: the max's VJP cancels out
        out = anp.log(anp.sum(anp.exp(x - top), axis=axis, keepdims=True)) + top
        return out if keepdims else anp.squeeze(out, axis=axis)

    return expit, logsumexp, anp.where, anp.max


def _split_vjp_2017(make_vjp, ops, loss_fn):
    """forward/backward on 2017's make_vjp: it returns (vjp, end_node); the loss is the
    node's value, and the seed a one of its vspace (2017 vspaces have no ones())."""
    import numpy as onp
    from autograd.core import getval

    def forward(params, inputs):
        vjp, end = make_vjp(lambda p: loss_fn(ops, p, inputs))(params)
        return (getval(end), vjp)

    def backward(state):
        loss, vjp = state
        return vjp(onp.ones_like(loss)[()])

    return forward, backward
