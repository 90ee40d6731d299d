"""Memory that grows every step: the verdict's test on made-up series, then planted leaks
of 16 KiB, 256 KiB and 4 MiB a step in an op-set workload file and in a native step,
each measured by a real memory pass (a fresh worker, as a sweep runs it), and the same
files without the leak flat."""

import textwrap

import pytest

from harness import frameworks
from harness.measure import leak
from harness.sweep import environment
from harness.sweep.worker_process import run_worker
from harness.workloads import loader

KIB, MIB = 1024, 1024 * 1024


def points(values):
    return list(enumerate(values))


def test_a_flat_series_with_page_scatter_is_flat():
    # the scatter of torch eager chained_dot tiny's own pages, a few pages up and down
    scatter = [0, 20, 28, 16, 16, 24, 24, 32, 28, 20, 20, 24, 24, 16, 28, 20, 32, 20, 16, 16, 36, 28, 16, 28]
    assert leak.judge(points([v * KIB for v in scatter]))["verdict"] == "flat"


def test_one_jump_and_a_cache_filling_are_growth_that_stops():
    jump = [0] * 6 + [512 * KIB] * 18  # an arena taken once
    assert leak.judge(points(jump))["verdict"] == "settles"
    late = [0] * 18 + [512 * KIB] * 6  # taken late: the second half's median slope is still 0
    assert leak.judge(points(late))["verdict"] == "flat"
    filling = [min(i, 10) * 64 * KIB for i in range(24)]  # grows for 10 steps, then holds
    found = leak.judge(points(filling))
    assert found["verdict"] == "settles" and found["bytes_per_step"] == 0


def test_steady_growth_grows_at_its_rate_and_needs_enough_steps():
    growing = [i * 16 * KIB + (4 * KIB if i % 3 else 0) for i in range(24)]
    found = leak.judge(points(growing))
    assert found["verdict"] == "grows" and found["bytes_per_step"] == pytest.approx(16 * KIB, rel=0.1)
    assert leak.judge(points(growing[:8]))["verdict"] == "inconclusive"  # growth seen, too few steps to say so
    assert leak.judge(points(growing[:4]))["verdict"] == "inconclusive"


def test_the_short_check_ends_a_flat_cell_and_extends_a_suspect_one():
    state = {"held": []}

    def read():
        return 100 * MIB + sum(len(b) for b in state["held"])

    flat = leak.run(lambda: None, read, lambda: None, budgets_s=(5.0, 5.0))
    assert flat["verdict"] == "flat" and not flat["extended"] and flat["readings"] == leak.SHORT
    grows = leak.run(lambda: state["held"].append(bytes(64 * KIB)), read, lambda: None, budgets_s=(5.0, 5.0))
    assert grows["verdict"] == "grows" and grows["extended"] and grows["readings"] == leak.LONG
    assert grows["bytes_per_step"] == 64 * KIB


def test_a_step_that_runs_out_of_memory_ends_the_phase_with_what_it_read():
    calls = {"n": 0}

    def step():
        calls["n"] += 1
        if calls["n"] > 9:
            raise MemoryError

    found = leak.run(step, lambda: calls["n"] * 64 * KIB, lambda: None, budgets_s=(5.0, 5.0))
    assert "out of memory in step 10" in found["stopped"] and found["readings"] == 10  # before each of steps 1-10


# ---- planted leaks, measured ---------------------------------------------------------------

OP_SET = textwrap.dedent('''
    SIZES = {{"tiny": {{"D": 16}}, "small": {{"D": 16}}, "paper": {{"D": 16}}}}
    BATCH_AXIS = "D"
    LEAK_BYTES = {leak}  # kept from every call of the loss (0: none)
    _kept = []


    def bound_bytes(cfg, dtype):
        return cfg["D"] * cfg["D"] * 4


    def init(rng, cfg, dtype):
        return {{"w": rng.standard_normal((cfg["D"], cfg["D"])).astype(dtype)}}, {{}}


    def loss(ops, params, inputs, cfg):
        if LEAK_BYTES:
            _kept.append(bytearray(b"\\x01") * LEAK_BYTES)  # written: resident, and never let go
        return ops.sum(ops.tanh(params["w"]))
''')

NATIVE = textwrap.dedent('''
    import autograd.numpy as np
    from autograd import grad

    FRAMEWORK = "autograd"
    SIZES = {{"tiny": {{"D": 16}}, "small": {{"D": 16}}}}
    LEAK_BYTES = {leak}
    _kept = []


    def setup(cfg):
        rng = np.random.default_rng(0)
        return {{"w": rng.standard_normal((cfg["D"], cfg["D"])), "grad": grad(lambda w: np.sum(np.tanh(w)))}}


    def step(state):
        if LEAK_BYTES:
            _kept.append(bytearray(b"\\x01") * LEAK_BYTES)
        state["w"] = state["w"] - 1e-3 * state["grad"](state["w"])
''')


def measure(tmp_path, kind, leak_bytes):
    source, framework = (OP_SET, "reference") if kind == "op-set" else (NATIVE, "autograd")
    adapter = frameworks.get(framework)
    ok, why = adapter.available()
    if not ok:
        pytest.skip(why)
    path = tmp_path / f"{kind.replace('-', '_')}_{leak_bytes}.py"
    path.write_text(source.format(leak=leak_bytes))
    cell = {"workload": loader.canonical(str(path)), "size": "tiny", "dtype": "float32", "framework": framework,
            "mode": "eager", "device": "cpu"}
    env, _ = environment.worker_environment(adapter, "memory")
    job = {"kind": "memory", "cell": cell, "seed": 0, "warmup": 1, "predict": False,
           "leak_budgets_s": [10.0, 30.0]}  # steps of microseconds: the counts decide, not the clock
    outcome = run_worker(job, env, str(tmp_path), path.stem, timeout_s=300)
    assert outcome.ok, outcome.message
    return outcome.result["leak"]


@pytest.mark.parametrize("kind", ["op-set", "native"])
@pytest.mark.parametrize("size", [
    16 * KIB,
    pytest.param(256 * KIB, marks=pytest.mark.slow),
    pytest.param(4 * MIB, marks=pytest.mark.slow),
])
def test_a_planted_leak_grows_at_its_size(tmp_path, kind, size):
    found = measure(tmp_path, kind, size)
    assert found["verdict"] == "grows", found
    # each step keeps `size` bytes of written pages: the slope is that, within 10 %
    assert found["bytes_per_step"] == pytest.approx(size, rel=0.10)


@pytest.mark.parametrize("kind", ["op-set", "native"])
def test_the_same_file_without_the_leak_is_flat(tmp_path, kind):
    found = measure(tmp_path, kind, 0)
    assert found["verdict"] == "flat", found
    assert abs(found["bytes_per_step"]) < leak.MIN_BYTES


def test_a_step_too_slow_for_its_budget_is_judged_on_the_steady_steps_readings():
    ran = []
    steady = [(i, 50 * MIB + (4 * KIB if i % 2 else 0)) for i in range(2, 5)]  # flat within a page
    found = leak.run(lambda: ran.append(1), lambda: 50 * MIB, lambda: None, first_step=5, prior=steady, step_s=9.0,
                     budgets_s=(1.0, 3.0))
    assert ran == [] and found["verdict"] == "flat" and found["from_steady"] == 3 and found["readings"] == 4
    growing = [(i, 50 * MIB + i * 64 * KIB) for i in range(2, 5)]
    found = leak.run(lambda: None, lambda: 50 * MIB + 5 * 64 * KIB, lambda: None, first_step=5, prior=growing,
                     step_s=9.0, budgets_s=(1.0, 3.0))
    assert found["verdict"] == "inconclusive" and "a step takes 9 s" in found["stopped"]


def test_growth_past_the_cap_ends_the_phase_before_it_takes_the_machine():
    held = []
    found = leak.run(lambda: held.append(1), lambda: len(held) * 300 * MIB, lambda: None, budgets_s=(5.0, 5.0))
    assert "stopped before it takes the machine's memory" in found["stopped"] and len(held) == 4
