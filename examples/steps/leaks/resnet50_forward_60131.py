"""tensorflow#60131: ResNet50's forward pass leaks on TensorFlow 2.12.0 with Python 3.11.

The report's loop as its author wrote it (CPU, no GPU; Docker's python:3.11.2 with
tensorflow==2.12.0): `model = tf.keras.applications.ResNet50()`, one uint8 image
(1, 224, 224, 3) made once with NumPy, then `model(inp)` again and again while the
process's RSS rises ("VGG19 seems to not leak"). The one change: `weights=None`, so
that nothing is downloaded (ImageNet's weights are numbers in the same variables; the
report is about the call). One gradmem step is one `model(inp)`; `paper` is the
report's image (224 pixels), `small` a 64-pixel one and `tiny` a 32-pixel one (the
smallest ResNet50 takes without weights): the growth the report describes is the same
at 32 and 224 pixels (43,785 and 43,511 bytes a step on 2.12.0, docs/leak_reports.md), and a
224-pixel forward takes seconds on a loaded CPU, too slow for the leak phase's budget.
The report names Python 3.11: TensorFlow 2.11 has no Python 3.11 wheel, so it and
2.12.0 are measured on 3.10 too (docs/seeds.md, "Leak reports").
"""

import numpy as np
import tensorflow as tf

FRAMEWORK = "tensorflow"
SOURCE = "github.com/tensorflow/tensorflow/issues/60131 (Dobiasd): memleak.py's loop, ResNet50(weights=None)"
# HW: the image's side in pixels, B: images in the one input
SIZES = {
    "tiny": {"B": 1, "HW": 32},
    "small": {"B": 1, "HW": 64},
    "paper": {"B": 1, "HW": 224},
}
BATCH_AXIS = "B"


def setup(cfg):
    np.random.seed(0)
    model = tf.keras.applications.ResNet50(weights=None, input_shape=(cfg["HW"], cfg["HW"], 3))
    inp = (np.random.rand(cfg["B"], cfg["HW"], cfg["HW"], 3) * 255).astype("uint8")
    return {"model": model, "inp": inp}


def step(state):
    return state["model"](state["inp"])
