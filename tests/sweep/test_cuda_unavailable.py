"""A framework without its GPU build on a machine with a GPU: its CUDA cells are
`unavailable`, saying which build to install, and the sweep goes on.

The parent's check (an NVIDIA device node) is told a GPU is here (`gpus`), so each
cell goes to a real worker, which loads the framework for "cuda" as on a GPU host; this
machine's builds are CPU-only, which is what such a host has for MLX, TensorFlow and
PaddlePaddle unless their GPU wheels are brought.
"""

import pytest

from harness.sweep import cells, schedule
from harness.sweep.cell_runner import CellRunner, Options
from harness.sweep.executor import LocalExecutor

pytestmark = pytest.mark.slow  # a worker per framework (TensorFlow's import alone takes seconds)

#: what each reason must name: the GPU build to install
NAMES = {"mlx": "mlx[cuda", "tensorflow": "tensorflow[and-cuda]", "paddle": "paddlepaddle-gpu"}


def test_mlx_tensorflow_and_paddle_without_their_gpu_builds_are_unavailable_naming_the_build(tmp_path):
    available = [name for name in NAMES if cells.adapter_or_reason(name)[0].available()[0]]
    if not available:
        pytest.skip("none of MLX, TensorFlow, PaddlePaddle is installed here")
    todo = cells.expand(["chained_dot"], available, ["tiny"], ["float32"], ["cuda"], ["eager"])
    executor = LocalExecutor(str(tmp_path), slots=1, start="spawn")  # one framework per process
    runner = CellRunner(str(tmp_path), Options(timeout_s=240), gpus=(True, "told so by the test"))
    records = []
    try:
        schedule.run(todo, runner, executor, lambda index, record: records.append(record))
    finally:
        executor.close()
    assert [r["framework"] for r in records] == available
    for record in records:
        assert record["status"] == "unavailable", record["message"]
        assert NAMES[record["framework"]] in record["message"]
