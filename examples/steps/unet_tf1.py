"""gradient-checkpointing #11's U-Net, in TensorFlow's graph mode with Adam's minimize, as
its author ran it (gchlebus, January 2018: code/profiling-tf-models/u_net.py of
gchlebus.github.io, linked from the issue).

The author's model: blocks of two same-padded 3x3 convs with bias and ReLU, 2x2 max
pooling down, a 2x2 stride-2 transposed conv up, concatenation with the encoder's map,
a 1x1 conv to 2 channels, tf.losses.softmax_cross_entropy against labels drawn uniform
in [0, 1), and `tf.train.AdamOptimizer().minimize(loss)` run by a session: the
"PLAIN_ADAM" row of the issue (75 MB), dropout 0 and no batch norm as profiled there.
It is built here in a graph of its own and run by a tf.compat.v1.Session; the author's
tf.layers.conv2d / conv2d_transpose / max_pooling2d (gone with Keras 3) are the tf.nn
ops they wrapped, with variables made as tf.layers made them (Glorot-uniform kernels,
zero biases). The author's model has one level down; `levels` is the config's so that
`small` is the op-set workload unet's small (N 2, 64x64, 8 filters, two levels) and
`paper` the author's profiled size (N 1, 128x128, 16 filters, one level).
"""

import numpy as np
import tensorflow as tf

FRAMEWORK = "tensorflow"
SOURCE = "cybertronai/gradient-checkpointing#11 (gchlebus): the U-Net with AdamOptimizer().minimize, graph mode"
SIZES = {
    "tiny": {"N": 1, "HW": 8, "filters": 3, "levels": 2},
    "small": {"N": 2, "HW": 64, "filters": 8, "levels": 2},
    "paper": {"N": 1, "HW": 128, "filters": 16, "levels": 1},
}
BATCH_AXIS = "N"
v1 = tf.compat.v1


def _variable(name, shape, dtype):
    fan_in, fan_out = int(np.prod(shape[:-1])), int(np.prod(shape[:-2]) * shape[-1])
    if name.endswith("bias"):
        return v1.get_variable(name, shape, dtype, initializer=v1.zeros_initializer())
    limit = (6.0 / (fan_in + fan_out)) ** 0.5  # Glorot uniform, tf.layers' default
    return v1.get_variable(name, shape, dtype, initializer=v1.random_uniform_initializer(-limit, limit))


def conv2d(x, filters, kernel, name):
    channels = x.shape[-1]
    with v1.variable_scope(name):
        w = _variable("kernel", [kernel, kernel, channels, filters], x.dtype)
        b = _variable("bias", [filters], x.dtype)
    return tf.nn.conv2d(x, w, strides=1, padding="SAME") + b


def conv2d_transpose(x, filters, name):  # kernel 2, stride 2: doubles the side
    channels = x.shape[-1]
    with v1.variable_scope(name):
        w = _variable("kernel", [2, 2, filters, channels], x.dtype)
        b = _variable("bias", [filters], x.dtype)
    n, h, wd = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    return tf.nn.conv2d_transpose(x, w, tf.stack([n, 2 * h, 2 * wd, filters]), strides=2, padding="VALID") + b


def unet_block(x, filters, name, n_conv=2):
    for idx in range(n_conv):
        x = tf.nn.relu(conv2d(x, filters, 3, f"{name}/conv{idx}"))
    return x


def build_model(image, filters, levels):
    skips, x = [], image
    for level in range(levels):
        x = unet_block(x, filters * 2**level, f"left{level}")
        skips.append(x)
        x = tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")
    x = unet_block(x, filters * 2**levels, f"level{levels}")
    for level in reversed(range(levels)):
        up = conv2d_transpose(x, filters * 2**level, f"up{level}")
        x = unet_block(tf.concat([up, skips[level]], axis=-1), filters * 2**level, f"right{level}")
    return conv2d(x, 2, 1, "logits")


def setup(cfg):
    graph = tf.Graph()
    dtype = tf.as_dtype(cfg["dtype"])
    with graph.as_default(), tf.device("/GPU:0" if cfg["device"] == "cuda" else "/CPU:0"):
        v1.set_random_seed(0)
        image = v1.placeholder(dtype, shape=[None, None, None, 1])
        labels = v1.placeholder(dtype, shape=[None, None, None, 2])
        with v1.variable_scope("model"):
            logits = build_model(image, cfg["filters"], cfg["levels"])
        loss = v1.losses.softmax_cross_entropy(labels, logits=logits)
        train = v1.train.AdamOptimizer().minimize(loss)
        init = v1.global_variables_initializer()
    session = v1.Session(graph=graph)
    session.run(init)
    rng = np.random.default_rng(0)
    shape = (cfg["N"], cfg["HW"], cfg["HW"])
    feed = {image: rng.random(shape + (1,)).astype(cfg["dtype"]), labels: rng.random(shape + (2,)).astype(cfg["dtype"])}
    return {"session": session, "fetches": [loss, train], "feed": feed}


def step(state):
    loss, _ = state["session"].run(state["fetches"], feed_dict=state["feed"])
    return loss
