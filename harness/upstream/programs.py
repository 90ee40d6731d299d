"""The training step as each framework's users write it, in the words of a standalone script.

One `Program` per framework: what the script imports and sets before the framework
starts, how NumPy arrays become the framework's (`arrays`), how a phase waits for
its results (`sync`), and `make_step(loss_fn)` per mode: the program the adapter runs
for the cell (harness/frameworks/<name>.py: `split_vjp`, else `value_and_grad`), so the
script measures the same program the sweep measured:

- torch: the loss on fresh leaves (``requires_grad_``), then ``torch.autograd.grad``;
  compiled: ``torch.compile(loss, dynamic=False)`` (AOTAutograd runs forward and
  backward as two programs), into an empty Inductor cache of its own (a cold compile,
  as every compiled torch worker's: docs/measurement.md, "Compile caches on disk");
- JAX: eager ``jax.vjp`` and its VJP function; compiled one
  ``jax.jit(jax.value_and_grad(loss))``; float64 enabled as the adapter does (the
  cells are float32: it changes only what a Python number becomes);
- TensorFlow: eager ``tf.GradientTape`` then ``tape.gradient``; compiled the same step
  in one ``tf.function`` (no XLA).
"""

from typing import NamedTuple

from harness import frameworks
from harness.frameworks import threads
from harness.sweep import environment as worker_environment


class Program(NamedTuple):
    prelude: str  # before the framework's import (set what it reads when it starts)
    imports: str
    setup: str  # after the imports: thread pools, devices
    arrays: str  # def arrays(tree): NumPy dict -> the framework's arrays; def sync(tree)
    steps: dict  # mode -> def make_step(loss_fn)
    aliases: dict  # name used by emitted code -> the line that defines it


_TORCH_CACHE = '''# A compiled torch step compiles into an empty Inductor cache of its own (a cold compile,
# whatever ran before on the machine), removed when the script ends.
import atexit
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="repro-inductor-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE
os.environ["TRITON_CACHE_DIR"] = os.path.join(_CACHE, "triton")
'''

_TORCH_STEP = '''def make_step(loss_fn):
    """(forward, backward) of loss_fn{how}."""
    {compile}
    def forward(params, inputs):
        with torch.enable_grad():
            leaves = {{k: v.detach().requires_grad_(True) for k, v in params.items()}}
            return run(leaves, inputs), leaves

    def backward(state):
        value, leaves = state
        return dict(zip(leaves, torch.autograd.grad(value, list(leaves.values()))))

    return forward, backward
'''

TORCH = Program(
    prelude="",
    imports="import torch",
    setup=f"torch.set_num_threads({threads.DEFAULT_THREADS})\ntorch.set_num_interop_threads({threads.DEFAULT_THREADS})\n",
    arrays='''def arrays(tree):
    """NumPy arrays as torch tensors (copies: a tensor from_numpy shares the array's memory)."""
    return {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tree.items()}


def sync(tree):
    return tree  # torch runs CPU ops as they are called
''',
    steps={
        "eager": _TORCH_STEP.format(how=": the loss op by op, then torch.autograd.grad", compile="run = loss_fn\n"),
        "compiled": _TORCH_STEP.format(how=" under torch.compile (Inductor), then torch.autograd.grad",
                                       compile="run = torch.compile(loss_fn, dynamic=False)\n"),
    },
    aliases={"F": "F = torch.nn.functional"},
)

JAX = Program(
    prelude="",
    imports="import jax\nimport jax.numpy as jnp",
    setup='jax.config.update("jax_enable_x64", True)  # as gradmem\'s adapter: the arrays stay float32\n'
          'jax.config.update("jax_default_device", jax.devices("cpu")[0])\n',
    arrays='''def arrays(tree):
    return {k: jax.device_put(v, jax.devices("cpu")[0]) for k, v in tree.items()}


def sync(tree):
    return jax.block_until_ready(tree)  # JAX dispatches asynchronously
''',
    steps={
        "eager": '''def make_step(loss_fn):
    """(forward, backward) of loss_fn without jit: jax.vjp, then its VJP function."""
    def forward(params, inputs):
        return jax.vjp(lambda p: loss_fn(p, inputs), params)

    def backward(state):
        value, vjp_fn = state
        (grads,) = vjp_fn(jnp.ones_like(value))
        return grads

    return forward, backward
''',
        "compiled": '''def make_step(loss_fn):
    """One program for the whole step: jax.jit(jax.value_and_grad(loss_fn))."""
    return (jax.jit(jax.value_and_grad(loss_fn)),)
''',
    },
    aliases={"lax": "from jax import lax"},
)

_TF_TAPE = '''    def step(params, inputs):
        with tf.device("/CPU:0"):
            with tf.GradientTape() as tape:
                tape.watch(params)
                value = loss_fn(params, inputs)
            grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            # a gather's gradient is IndexedSlices: made dense, as torch's and JAX's are
            return value, {k: tf.convert_to_tensor(g) for k, g in grads.items()}
'''

TENSORFLOW = Program(
    prelude="",
    imports="import tensorflow as tf",
    setup=(f"tf.config.threading.set_intra_op_parallelism_threads({threads.DEFAULT_THREADS})\n"
           f"tf.config.threading.set_inter_op_parallelism_threads({threads.DEFAULT_THREADS})\n"
           'tf.config.set_visible_devices([], "GPU")  # a CPU measurement\n'),
    arrays='''def arrays(tree):
    with tf.device("/CPU:0"):
        return {k: tf.identity(tf.constant(v)) for k, v in tree.items()}


def sync(tree):
    return tree  # on the CPU an eager op and a tf.function call return computed tensors
''',
    steps={
        "eager": '''def make_step(loss_fn):
    """(forward, backward) of loss_fn: the loss op by op under a GradientTape, then tape.gradient."""
    def forward(params, inputs):
        with tf.device("/CPU:0"):
            tape = tf.GradientTape()
            with tape:
                tape.watch(params)
                value = loss_fn(params, inputs)
        return value, tape, params

    def backward(state):
        value, tape, params = state
        with tf.device("/CPU:0"):
            grads = tape.gradient(value, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
            # a gather's gradient is IndexedSlices: made dense, as torch's and JAX's are
            return {k: tf.convert_to_tensor(g) for k, g in grads.items()}

    return forward, backward
''',
        "compiled": '''def make_step(loss_fn):
    """One tf.function around the whole gradient step (graph mode, no XLA)."""
''' + _TF_TAPE + '''
    return (tf.function(step),)
''',
    },
    aliases={},
)

PROGRAMS = {"torch": TORCH, "jax": JAX, "tensorflow": TENSORFLOW}


def program(framework, mode):
    """(Program, make_step source) of `framework` in `mode`."""
    found = PROGRAMS[framework]
    return found, found.steps[mode]


def prelude(framework, mode):
    """What the script sets before the framework starts (torch compiled: its own cache)."""
    adapter = frameworks.get(framework)
    return _TORCH_CACHE if mode in getattr(adapter, "own_compile_cache_modes", ()) else PROGRAMS[framework].prelude


def environment(framework):
    """The variables a memory pass's worker starts with (harness/sweep/environment.py):
    the thread counts, the adapter's own, the allocator settings; sorted."""
    adapter = frameworks.get(framework)
    found = dict(threads.thread_environment(threads.DEFAULT_THREADS))
    found.pop(threads.ENV_VAR, None)  # gradmem's own name for the count
    found.update(adapter.environment or {})
    for key, value in worker_environment.MEMORY_SETTINGS.items():
        found.setdefault(key, value)
    # what another framework alone reads is left out of a script that never imports it
    for key in list(found):
        if (key.startswith("TF_") and framework != "tensorflow") or (key == "PJRT_NPROC" and framework != "jax"):
            found.pop(key)
    return dict(sorted(found.items()))


def distributions(framework):
    """The distributions whose versions a script reports."""
    adapter = frameworks.get(framework)
    return [d for d in dict.fromkeys([*adapter.distributions, adapter.package or "", "numpy"]) if d]
