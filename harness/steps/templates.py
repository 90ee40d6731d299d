"""`harness new-step`'s templates: one training step of a small MLP with SGD per framework.

Each is the same model (x -> relu(x W1 + b1) W2 + b2, mean squared error against y, one
SGD update) written the way that framework's users write a training step, so that a
new file runs as it is and shows where a model, an optimizer and data go. `{name}` and
`{path}` are filled in by the command; braces meant for the file are doubled.

The reference engine has none: it has no API outside the op set (a model for it is an
op-set workload: `harness new-workload`).
"""

HEADER = '''"""{name}: one training step of your model, in {title}, written as you run it.

A gradmem native step (the contract: harness/steps/__init__.py; a guide: docs/workloads.md,
"Your own training step"). gradmem calls setup(cfg) once, before its baseline, then
step(state) for the cold first step and the steady ones, each measured as one call.
Measure it:

    python -m harness run --workload {path} --framework {framework} --size small --out r.jsonl
"""
'''

# The sizes, the batch axis and the bound are the same in every template.
COMMON = '''
FRAMEWORK = "{framework}"  # the row it runs in; in every other row it is not a cell
SOURCE = "where the model comes from (a paper, an issue, your repository)"
# One config per size (tiny for tests, small by default, paper optional). setup() gets a
# copy with the cell's "device" ("cpu" | "cuda") and "dtype" ("float32" | "float64") added.
SIZES = {{
    "tiny": {{"B": 4, "D": 8, "H": 16}},
    "small": {{"B": 256, "D": 256, "H": 1024}},
}}
BATCH_AXIS = "B"  # the config key `harness scale` varies
LR = 1e-3
'''

BOUND = '''

def bound_bytes(cfg):
    """Optional: the bytes the step must keep for its backward, derived by hand (without
    it a record's bound is absent). Here: the hidden activation relu(x W1 + b1) (B, H),
    read by relu's gradient and W2's, and the output (B, D), read by the loss's."""
    itemsize = 4 if cfg["dtype"] == "float32" else 8
    return cfg["B"] * (cfg["H"] + cfg["D"]) * itemsize
'''

TORCH = '''
import torch
''' + COMMON + '''

def setup(cfg):
    """The model, the optimizer and the data: made before the baseline, so they are in
    no step's peak (what the first step adds, e.g. Adam's moments, is in retained)."""
    torch.manual_seed(0)
    device, dtype = torch.device(cfg["device"]), getattr(torch, cfg["dtype"])
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    model = torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(), torch.nn.Linear(H, D)).to(device, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x = torch.randn(B, D, device=device, dtype=dtype)
    y = torch.randn(B, D, device=device, dtype=dtype)
    return {{"model": model, "optimizer": optimizer, "x": x, "y": y}}


def step(state):
    """One training step: what gradmem measures."""
    state["optimizer"].zero_grad()
    loss = torch.nn.functional.mse_loss(state["model"](state["x"]), state["y"])
    loss.backward()
    state["optimizer"].step()
    return loss.detach()  # on CUDA the adapter synchronises the device after each step
''' + BOUND

JAX = '''
import jax
import jax.numpy as jnp
''' + COMMON + '''

def loss_fn(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), loss


def setup(cfg):
    """Parameters and data on the cell's device (float64 needs jax_enable_x64, which
    the harness's JAX adapter sets)."""
    device = jax.devices("gpu" if cfg["device"] == "cuda" else "cpu")[0]
    dtype = jnp.dtype(cfg["dtype"])
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {{
        "w1": jax.random.normal(k1, (D, H), dtype) / D**0.5, "b1": jnp.zeros(H, dtype),
        "w2": jax.random.normal(k2, (H, D), dtype) / H**0.5, "b2": jnp.zeros(D, dtype),
    }}
    state = {{"params": params, "x": jax.random.normal(k3, (B, D), dtype), "y": jax.random.normal(k4, (B, D), dtype)}}
    return jax.device_put(state, device)


def step(state):
    """One training step: what gradmem measures (the first call compiles train_step)."""
    state["params"], loss = train_step(state["params"], state["x"], state["y"])
    return loss


def sync(state):
    """JAX dispatches asynchronously: wait for the updated parameters, not just the loss."""
    jax.block_until_ready(state["params"])
''' + BOUND

TENSORFLOW = '''
import tensorflow as tf
''' + COMMON + '''

def setup(cfg):
    """Variables and data on the cell's device. The step below runs eagerly; wrap
    train_step in tf.function if your code does."""
    tf.random.set_seed(0)
    dtype = tf.as_dtype(cfg["dtype"])
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    with tf.device("/GPU:0" if cfg["device"] == "cuda" else "/CPU:0"):
        variables = [
            tf.Variable(tf.random.normal((D, H), dtype=dtype) / D**0.5), tf.Variable(tf.zeros(H, dtype)),
            tf.Variable(tf.random.normal((H, D), dtype=dtype) / H**0.5), tf.Variable(tf.zeros(D, dtype)),
        ]
        x, y = tf.random.normal((B, D), dtype=dtype), tf.random.normal((B, D), dtype=dtype)
    return {{"variables": variables, "x": x, "y": y}}


def train_step(variables, x, y):
    w1, b1, w2, b2 = variables
    with tf.GradientTape() as tape:
        h = tf.nn.relu(x @ w1 + b1)
        loss = tf.reduce_mean((h @ w2 + b2 - y) ** 2)
    for variable, grad in zip(variables, tape.gradient(loss, variables)):
        variable.assign_sub(LR * grad)
    return loss


def step(state):
    """One training step: what gradmem measures."""
    return train_step(state["variables"], state["x"], state["y"])
''' + BOUND

AUTOGRAD = '''
import autograd.numpy as np
import numpy
from autograd import grad
''' + COMMON + '''

def loss_fn(params, x, y):
    h = np.maximum(np.dot(x, params["w1"]) + params["b1"], 0.0)
    return np.mean((np.dot(h, params["w2"]) + params["b2"] - y) ** 2)


def setup(cfg):
    """NumPy arrays (HIPS autograd runs on the CPU only)."""
    rng = numpy.random.default_rng(0)
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    params = {{
        "w1": rng.standard_normal((D, H)) / D**0.5, "b1": numpy.zeros(H),
        "w2": rng.standard_normal((H, D)) / H**0.5, "b2": numpy.zeros(D),
    }}
    cast = lambda tree: {{k: v.astype(cfg["dtype"]) for k, v in tree.items()}}
    data = cast({{"x": rng.standard_normal((B, D)), "y": rng.standard_normal((B, D))}})
    return dict(data, params=cast(params), grad=grad(loss_fn))


def step(state):
    """One training step: what gradmem measures."""
    grads = state["grad"](state["params"], state["x"], state["y"])
    state["params"] = {{k: v - LR * grads[k] for k, v in state["params"].items()}}
''' + BOUND

PYTENSOR = '''
import numpy
import pytensor
import pytensor.tensor as pt
''' + COMMON + '''

def setup(cfg):
    """Shared variables, the symbolic graph and one compiled function with the SGD
    updates (compiling is set-up here, as in your script: before the baseline)."""
    rng = numpy.random.default_rng(0)
    B, D, H, dtype = cfg["B"], cfg["D"], cfg["H"], cfg["dtype"]
    shared = lambda a: pytensor.shared(a.astype(dtype))
    w1, b1 = shared(rng.standard_normal((D, H)) / D**0.5), shared(numpy.zeros(H))
    w2, b2 = shared(rng.standard_normal((H, D)) / H**0.5), shared(numpy.zeros(D))
    x, y = pt.matrix("x", dtype=dtype), pt.matrix("y", dtype=dtype)
    h = pt.maximum(x @ w1 + b1, 0)
    loss = pt.mean((h @ w2 + b2 - y) ** 2)
    params = [w1, b1, w2, b2]
    updates = [(p, p - numpy.asarray(LR, dtype) * g) for p, g in zip(params, pytensor.grad(loss, params))]
    train = pytensor.function([x, y], loss, updates=updates)
    data = {{k: rng.standard_normal((B, D)).astype(dtype) for k in ("x", "y")}}
    return dict(data, train=train)


def step(state):
    """One training step: what gradmem measures."""
    return state["train"](state["x"], state["y"])
''' + BOUND

MLX = '''
import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
''' + COMMON + '''

class MLP(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.l1, self.l2 = nn.Linear(D, H), nn.Linear(H, D)

    def __call__(self, x):
        return self.l2(nn.relu(self.l1(x)))


def loss_fn(model, x, y):
    return mx.mean((model(x) - y) ** 2)


def setup(cfg):
    """MLX computes lazily: mx.eval makes the arrays before the baseline (float32 only)."""
    mx.random.seed(0)
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    model = MLP(D, H)
    optimizer = optim.SGD(learning_rate=LR)
    x, y = mx.random.normal((B, D)), mx.random.normal((B, D))
    mx.eval(model.parameters(), x, y)
    return {{"model": model, "optimizer": optimizer, "x": x, "y": y, "loss_and_grad": nn.value_and_grad(model, loss_fn)}}


def step(state):
    """One training step: what gradmem measures."""
    loss, grads = state["loss_and_grad"](state["model"], state["x"], state["y"])
    state["optimizer"].update(state["model"], grads)
    return loss


def sync(state):
    """Nothing runs until it is evaluated: evaluate the updated model and optimizer."""
    mx.eval(state["model"].parameters(), state["optimizer"].state)
''' + BOUND

TINYGRAD = '''
from tinygrad import Tensor, dtypes, nn

try:
    from tinygrad import Context
except ImportError:  # older releases: Tensor.train() instead
    Context = None
''' + COMMON + '''

class MLP:
    def __init__(self, D, H):
        self.l1, self.l2 = nn.Linear(D, H), nn.Linear(H, D)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


def setup(cfg):
    """tinygrad computes lazily: realize() makes the arrays before the baseline."""
    Tensor.manual_seed(0)
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    model = MLP(D, H)
    params = nn.state.get_parameters(model)
    optimizer = nn.optim.SGD(params, lr=LR)
    dtype = getattr(dtypes, cfg["dtype"])
    x, y = Tensor.randn(B, D, dtype=dtype).realize(), Tensor.randn(B, D, dtype=dtype).realize()
    Tensor.realize(*params)
    return {{"model": model, "optimizer": optimizer, "params": params, "x": x, "y": y}}


def step(state):
    """One training step: what gradmem measures."""
    # the optimizer needs training mode on: Tensor.train() in older tinygrad releases, the
    # TRAINING context variable in newer ones
    with Tensor.train() if hasattr(Tensor, "train") else Context(TRAINING=1):
        state["optimizer"].zero_grad()
        loss = ((state["model"](state["x"]) - state["y"]) ** 2).mean()
        loss.backward()
        state["optimizer"].step()  # realizes the updated parameters
    return loss.realize()
''' + BOUND

PADDLE = '''
import paddle
''' + COMMON + '''

def setup(cfg):
    """The model, the optimizer and the data on the cell's device."""
    paddle.seed(0)
    paddle.set_device("gpu" if cfg["device"] == "cuda" else "cpu")
    paddle.set_default_dtype(cfg["dtype"])
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    model = paddle.nn.Sequential(paddle.nn.Linear(D, H), paddle.nn.ReLU(), paddle.nn.Linear(H, D))
    optimizer = paddle.optimizer.SGD(learning_rate=LR, parameters=model.parameters())
    x, y = paddle.randn([B, D], dtype=cfg["dtype"]), paddle.randn([B, D], dtype=cfg["dtype"])
    return {{"model": model, "optimizer": optimizer, "x": x, "y": y}}


def step(state):
    """One training step: what gradmem measures."""
    loss = paddle.nn.functional.mse_loss(state["model"](state["x"]), state["y"])
    loss.backward()
    state["optimizer"].step()
    state["optimizer"].clear_grad()
    return loss
''' + BOUND

#: framework -> (its name in prose, the body after the header)
TEMPLATES = {
    "torch": ("PyTorch", TORCH),
    "jax": ("JAX", JAX),
    "tensorflow": ("TensorFlow", TENSORFLOW),
    "autograd": ("HIPS autograd", AUTOGRAD),
    "pytensor": ("PyTensor", PYTENSOR),
    "mlx": ("MLX", MLX),
    "tinygrad": ("tinygrad", TINYGRAD),
    "paddle": ("PaddlePaddle", PADDLE),
}


def render(framework, name, path):
    """The text of a new native step file for `framework`."""
    title, body = TEMPLATES[framework]
    fields = {"name": name, "path": path, "framework": framework, "title": title}
    return HEADER.format(**fields) + body.format(**fields)
