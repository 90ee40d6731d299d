"""What a cell's step runs, and what its step peak means.

A compiled cell measures the one program its framework's users write: JAX's
``jax.jit(jax.value_and_grad(f))``, a ``tf.function``, one PyTensor function,
``mx.compile``, ``TinyJit``; torch.compile and Paddle's to_static run forward and
backward as two programs themselves, so theirs stay split. MLX and tinygrad serve
steps from freed buffers they keep: their memory passes run with that cache off, so
the step peak is what a step allocates, as in every other row."""

import subprocess
import sys

import pytest

from harness import frameworks, workloads
from harness.frameworks.base import Adapter
from harness.measure.phases import Step
from one_pass import COLS, memory_pass

#: compiled rows whose framework runs forward and backward as two programs itself
#: (torch.compile's AOTAutograd, Paddle's to_static); every other compiled row of the
#: registry must measure one program
TWO_PROGRAMS = ("torch", "paddle")
ONE_PROGRAM = tuple(n for n in frameworks.NAMES if "compiled" in frameworks.get(n).modes and n not in TWO_PROGRAMS)


def loaded(name, mode):
    adapter = frameworks.get(name)
    ok, why = adapter.available()
    if not ok:
        pytest.skip(why)
    return adapter.load("cpu", mode)


def step_of(adapter, mode):
    problem = workloads.build("chained_dot", "tiny", "float32")
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)
    return Step(adapter, problem.loss, params, inputs, mode)


@pytest.mark.parametrize("name", ONE_PROGRAM)
def test_a_compiled_step_is_the_one_program_users_write(name):
    adapter = loaded(name, "compiled")
    step = step_of(adapter, "compiled")
    assert step.kind == "joint" and step.phases() == ["gradient"]
    program = adapter.step_program("compiled", split=False)
    assert program.startswith(adapter.compiled_as) and "one call" in program


@pytest.mark.parametrize("name", TWO_PROGRAMS)
def test_frameworks_that_split_forward_and_backward_themselves_stay_split(name):
    # in a fresh interpreter: Paddle segfaults on import after TensorFlow in one process
    if not frameworks.get(name).available()[0]:
        pytest.skip(frameworks.get(name).available()[1])
    script = ("import sys; from harness import frameworks, workloads; from harness.measure.phases import Step\n"
              "a = frameworks.get(sys.argv[1]); a.load('cpu', 'compiled')\n"
              "p = workloads.build('chained_dot', 'tiny', 'float32')\n"
              "print(Step(a, p.loss, a.from_numpy(p.params), a.from_numpy(p.inputs), 'compiled').kind)\n")
    done = subprocess.run([sys.executable, "-c", script, name], capture_output=True, text=True, timeout=300)
    assert done.stdout.split()[-1:] == ["split"], done.stderr[-2000:]


def test_jax_eager_keeps_its_phases():
    # eager JAX runs jax.vjp then the VJP function: two calls users make too
    assert step_of(loaded("jax", "eager"), "eager").kind == "split"


# ---- the lazy rows' step peak against the bound ---------------------------------------
# (one_pass.py: chained_dot at cols=16384 keeps 4 arrays of 2 MiB, the 8 MiB bound.)
# Neither MLX nor tinygrad recomputes a matmul chain, so a step that allocates what it
# needs peaks at no less than the bound; served from their caches it read 0.0-0.5 MiB
# (0.01x) before.


#: the rows that serve steps from a buffer cache (their adapter turns it off: MLX, tinygrad)
CACHED = [(n, mode) for n in frameworks.NAMES if type(frameworks.get(n)).buffer_cache_off is not Adapter.buffer_cache_off
          for mode in frameworks.get(n).modes]


@pytest.mark.parametrize("framework, mode", CACHED)
@pytest.mark.slow  # acceptance: real sweeps of the lazy rows
def test_lazy_rows_step_peak_is_at_least_the_bound(framework, mode, tmp_path):
    result = memory_pass(framework, mode, tmp_path)
    bound = workloads.bound_bytes("chained_dot", "tiny", "float32", batch=COLS)
    assert result["peak_bytes"]["total"] >= 0.95 * bound, (result["peak_bytes"], bound)
    cache = result["buffer_cache"]
    assert "off" in cache["memory_pass"]
    # With the cache on, what one step frees is kept for the next: at least one of the
    # (D, cols) arrays it made (z_i, or the JIT's buffers for TinyJit).
    assert cache["held_bytes"] >= 32 * COLS * 4, cache
    if framework == "tinygrad" and mode == "compiled":
        # TinyJit's own buffers are counted into the step, named in the record
        assert cache["step_held_bytes"] >= 32 * COLS * 4 and "TinyJit" in cache["step_held_method"], cache
