"""The framework adapters, one module each; `get(name)` finds one by name.

The registry holds module paths, not imported modules: importing an adapter module
is cheap (it imports its framework only in `load()`), but nothing here should pull a
framework into a process that did not ask for it.
"""

import importlib

from harness.choices import check_choice

# name -> "module:Class". Order is the order of tables and reports.
ADAPTERS = {
    "reference": "harness.frameworks.reference:ReferenceAdapter",
    "autograd": "harness.frameworks.autograd:AutogradAdapter",
    "torch": "harness.frameworks.torch:TorchAdapter",
    "jax": "harness.frameworks.jax:JaxAdapter",
    "tensorflow": "harness.frameworks.tensorflow:TensorflowAdapter",
    "pytensor": "harness.frameworks.pytensor:PytensorAdapter",
    "mlx": "harness.frameworks.mlx:MlxAdapter",
    "tinygrad": "harness.frameworks.tinygrad:TinygradAdapter",
    "paddle": "harness.frameworks.paddle:PaddleAdapter",
}
NAMES = tuple(ADAPTERS)


def get(name, **options):
    """A fresh adapter instance for `name` (ChoiceError lists the valid names);
    `options` go to its constructor (e.g. the reference engine's ``order``)."""
    check_choice("framework", name, NAMES)
    module_name, class_name = ADAPTERS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)(**options)
