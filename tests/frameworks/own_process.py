"""Adapters whose in-process tests need a pytest process of their own.

PaddlePaddle 3.3.1 segfaults while loading libpaddle when TensorFlow 2.21 was imported
first in the same process (`import tensorflow; import paddle`; the other order works,
and torch, JAX, PyTensor, MLX and tinygrad before it are fine). The harness never
shares a process between frameworks, but the adapter tests load them into the pytest
process, TensorFlow before Paddle. So the suite's main process skips Paddle's
in-process tests and tests/frameworks/test_own_process.py runs them in a fresh pytest
process where ``GRADMEM_TEST_OWN_PROCESS`` names the adapter.
"""

import os

ENV = "GRADMEM_TEST_OWN_PROCESS"
OWN_PROCESS = {
    "paddle": "paddle segfaults on import after tensorflow in one process: its in-process tests run in "
              "a pytest process of their own (tests/frameworks/test_own_process.py)",
}


def in_this_process(name):
    """False for an adapter whose tests run in their own process, unless this is it."""
    return name not in OWN_PROCESS or os.environ.get(ENV) == name
