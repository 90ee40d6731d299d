"""`python -m harness check`: every (workload, framework) pair at tiny agrees with the
reference engine, and the check itself catches what it must (wrong values, float32
turned float64, NaN, a crashing or hanging worker, unknown names).

Budget (2 shared cores, warm compile caches): the eager check of 6 workloads x 6
frameworks x 2 dtypes takes ~70 s (JAX eager compiles each primitive once per shape;
PyTensor compiles each graph). Compiled modes run for jax (jax.jit), tensorflow
(tf.function) and pytensor (CVM) on every workload, and for torch.compile on two
workloads only: Inductor compiles a forward and a backward graph per workload and
dtype with g++ (0.3-8 s each with a warm cache, ~25 s cold), so all of torch.compile
is left to `python -m harness check --mode compiled`, which covers every pair. Compiled
modes are checked in float32 only here: it is the same graph as float64 with the
stricter property (float32 kept through the compiler's rewrites); the CLI runs both.
The fixtures check two frameworks at once (`jobs=2`: each framework's worker is a
process of its own, and these are gradients, not timings), in one run each, subsets
included (`only=`): measured 2026-12-02 on the 2-core AMD box at load 3, eager 49 s and
compiled 53 s, where one run per subset took 101 and 256 s in the CI run before.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness import frameworks, workloads
from harness.check import command as check
from harness.check import framework_runner
from harness.choices import ChoiceError
from harness.frameworks.base import Adapter
from harness.measure.kinks import Truth

# Compiled modes whose compile is slow run on a subset of the workloads here; every
# other compiled mode of the registry runs on all of them (COMPILED_EVERYWHERE). Measured
# first calls at tiny with the machine shared: torch.compile's Inductor 0.3-8 s per
# graph warm, ~25 s cold (see the module docstring); mx.compile's g++ 4-63 s per
# workload, TinyJit ~2 eager steps, to_static 1-2 s on these, 11-21 s on
# seq2seq_attention and tiny_nerf. `python -m harness check --mode compiled` covers
# every pair.
COMPILED_SUBSET = {"torch": ("chained_dot", "shared_linear"), "mlx": ("shared_linear",),
                   "tinygrad": ("chained_dot",), "paddle": ("chained_dot", "rnn_fanout", "shared_linear")}
COMPILED_EVERYWHERE = tuple(n for n in frameworks.NAMES
                            if "compiled" in frameworks.get(n).modes and n not in COMPILED_SUBSET)


def available(name):
    try:
        adapter = frameworks.get(name)
    except ImportError as err:
        return False, f"adapter cannot be imported: {err}"
    return adapter.available()


# tinygrad eager on a subset: its first call builds every kernel with clang, and its
# Python scheduler is slow on the convolutional workloads (tiny, machine shared: first
# call 6-12 s on these two, 160 s on unet float64, steady 3.8 s there); the CLI check
# (`--framework tinygrad`) covers every pair.
EAGER_SUBSET = {"tinygrad": ("chained_dot", "rnn_fanout")}


@pytest.fixture(scope="module")
def eager_rows(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("eager"))
    rows, skipped = check.run_check(workloads.NAMES, frameworks.NAMES, "tiny", ["float64", "float32"], ["eager"],
                                    "cpu", 0, 600, out, jobs=2, only=EAGER_SUBSET)
    return {(r.workload, r.framework, r.mode, r.dtype): r for r in rows}, skipped


@pytest.fixture(scope="module")
def compiled_rows(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("compiled"))
    # one run: the truth computed once, and two frameworks at a time whatever their subsets
    rows, skipped = check.run_check(workloads.NAMES, [*COMPILED_EVERYWHERE, *COMPILED_SUBSET], "tiny", ["float32"],
                                    ["compiled"], "cpu", 0, 900, out, jobs=2, only=COMPILED_SUBSET)
    return {(r.workload, r.framework, r.mode, r.dtype): r for r in rows}, skipped


def assert_agrees(rows, workload, framework, mode, dtypes=("float64", "float32")):
    ok, reason = available(framework)
    if not ok:
        pytest.skip(f"{framework} unavailable: {reason}")
    for dtype in dtypes:
        if dtype not in frameworks.get(framework).dtypes:  # MLX: float32 only, with its reason
            continue
        row = rows[(workload, framework, mode, dtype)]
        if row.status == "unavailable":
            pytest.skip(f"{framework} {mode}: {row.message}")
        if framework == "reference" and dtype == "float64":
            assert row.status == "reference", row.message
            continue
        assert row.status == "ok", f"{dtype}: {row.status}: {row.message}"
        assert row.error <= check.TOLERANCE[dtype]  # compare() also checked every dtype


@pytest.mark.parametrize("framework", frameworks.NAMES)
@pytest.mark.parametrize("workload", workloads.NAMES)
@pytest.mark.slow  # acceptance: every framework's check
def test_eager_gradient_agrees_with_the_reference(eager_rows, workload, framework):
    if workload not in EAGER_SUBSET.get(framework, (workload,)):
        pytest.skip(f"{framework} eager runs {', '.join(EAGER_SUBSET[framework])} here (see EAGER_SUBSET)")
    assert_agrees(eager_rows[0], workload, framework, "eager")


@pytest.mark.parametrize(
    "workload, framework",
    [(w, f) for f in COMPILED_EVERYWHERE for w in workloads.NAMES]
    + [(w, fw) for fw, subset in COMPILED_SUBSET.items() for w in subset],
)
@pytest.mark.slow  # acceptance: every framework's check
def test_compiled_gradient_agrees_with_the_reference(compiled_rows, workload, framework):
    assert_agrees(compiled_rows[0], workload, framework, "compiled", dtypes=("float32",))


def test_the_subsets_name_registry_rows_and_workloads():
    # a row or workload is checked everywhere unless a subset above names it, with why
    for subsets, mode in ((COMPILED_SUBSET, "compiled"), (EAGER_SUBSET, "eager")):
        for name, subset in subsets.items():
            assert mode in frameworks.get(name).modes, (name, mode)
            assert subset and set(subset) <= set(workloads.NAMES), (name, subset)
    assert "jax" in COMPILED_EVERYWHERE and "autograd" not in COMPILED_EVERYWHERE  # autograd: eager only


def test_only_narrows_a_framework_to_its_workloads_and_the_truth_covers_them_all():
    cells, _ = check.plan(["chained_dot", "unet"], ["jax", "autograd"], "tiny", ["float32"], ["eager"], 0,
                          only={"jax": ("unet",)})
    assert [c["id"] for c in cells["jax"]] == ["jax-unet-eager-float32"]
    assert [c["workload"] for c in cells["autograd"]] == ["chained_dot", "unet"]  # not named: every workload
    assert [c["workload"] for c in cells["reference"]] == ["chained_dot", "unet"]  # the truth: every workload


def test_frameworks_without_a_compiled_mode_are_skipped_with_the_reason():
    cells, skipped = check.plan(["chained_dot"], ["autograd", "reference"], "tiny", ["float64"], ["compiled"], 0)
    reasons = {fw: reason for fw, mode, reason in skipped if mode == "compiled"}
    assert "autograd has no compiled mode (modes: eager)" in reasons["autograd"]
    assert "autograd" not in cells
    # the reference still computes the truth every other cell is compared with
    assert [c["id"] for c in cells["reference"]] == ["truth-chained_dot-eager-float64"]


# ---- compare(): what fails a cell ---------------------------------------------------------


SHAPES = {"W": (3, 4), "b": (4,)}


def reference_and_copy(dtype="float64"):
    rng = np.random.default_rng(0)
    ref = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
    return np.float64(1.5), ref, np.asarray(1.5, dtype), {k: v.astype(dtype) for k, v in ref.items()}


def test_compare_accepts_equal_gradients():
    ref_loss, ref, loss, grads = reference_and_copy()
    error, worst, problems, _ = check.compare(loss, grads, Truth(ref_loss, ref, 0, []), SHAPES, "float64")
    assert problems == [] and error == 0


def test_compare_rejects_an_error_above_the_tolerance():
    ref_loss, ref, loss, grads = reference_and_copy()
    grads["b"] = grads["b"] * (1 + 1e-5)  # 1e-5 relative > float64's 1e-8
    error, worst, problems, _ = check.compare(loss, grads, Truth(ref_loss, ref, 0, []), SHAPES, "float64")
    assert worst == "b" and error == pytest.approx(1e-5, rel=1e-3)
    assert problems and "b: relative error" in problems[0]
    # the same error passes in float32 (tolerance 1e-4) when the dtype is float32
    ref_loss, ref, loss, grads = reference_and_copy("float32")
    grads["b"] = grads["b"] * np.float32(1 + 1e-5)
    assert check.compare(loss, grads, Truth(ref_loss, ref, 0, []), SHAPES, "float32")[2] == []


def test_compare_rejects_float32_turned_float64():
    ref_loss, ref, loss, grads = reference_and_copy("float32")
    grads["W"] = grads["W"].astype(np.float64)  # right values, twice the bytes
    _, _, problems, _ = check.compare(loss, grads, Truth(ref_loss, ref, 0, []), SHAPES, "float32")
    assert problems == ["W: dtype float64, expected float32"]
    _, _, problems, _ = check.compare(np.float64(1.5), reference_and_copy("float32")[3], Truth(ref_loss, ref, 0, []), SHAPES, "float32")
    assert problems == ["(loss): dtype float64, expected float32"]


def test_compare_rejects_nan_missing_and_misshapen_gradients():
    ref_loss, ref, loss, grads = reference_and_copy()
    grads["W"] = grads["W"].copy()
    grads["W"][0, 0] = np.nan
    error, worst, problems, _ = check.compare(loss, grads, Truth(ref_loss, ref, 0, []), SHAPES, "float64")
    assert worst == "W" and np.isnan(error) and problems
    _, _, problems, _ = check.compare(loss, {"W": grads["W"]}, Truth(ref_loss, ref, 0, []), SHAPES, "float64")
    assert any("gradient names" in p for p in problems)
    _, _, problems, _ = check.compare(loss, {**grads, "b": grads["b"][:2]}, Truth(ref_loss, ref, 0, []), SHAPES, "float64")
    assert "b: shape (2,), expected (4,)" in problems


def test_relative_error_of_a_zero_reference_is_absolute():
    assert check.relative_error(np.zeros(3), np.zeros(3)) == 0
    assert check.relative_error(np.array([3.0, 4.0]), np.zeros(2)) == 5.0


# ---- the worker: crashes and hangs are rows, not the end of the check ------------------------


# A user's workload whose loss misbehaves in the worker as the cell's `fault` says:
# "crash" (the process dies: no result, no traceback), "hang", "raise"; "" computes.
FAULTY = textwrap.dedent(
    """
    import os, sys, time
    SIZES = {"tiny": {"D": 4}, "small": {"D": 4}, "paper": {"D": 4}}
    BATCH_AXIS = "D"
    FAULT = %r

    def init(rng, cfg, dtype):
        return {"w": rng.standard_normal((cfg["D"],)).astype(dtype)}, {}

    def loss(ops, params, inputs, cfg):
        if FAULT == "crash":
            print("segfault stand-in", file=sys.stderr, flush=True)
            os._exit(139)
        if FAULT == "hang":
            time.sleep(600)
        if FAULT == "raise":
            raise ValueError("a bug in the model")
        return ops.sum(ops.mul(params["w"], params["w"]))
    """
)


def faulty_workloads(tmp_path, faults):
    refs = []
    for fault in faults:
        path = tmp_path / f"faulty_{fault or 'fine'}.py"
        path.write_text(FAULTY % fault)
        refs.append(workloads.resolve(str(path)))
    return refs


def test_a_crashing_or_hanging_cell_is_reported_per_cell_and_the_rest_runs(tmp_path):
    # Each cell is a worker of its own, started, timed out and killed as `harness run`'s
    # passes are (harness/check/framework_runner.py): a crash, a hang or an exception is that cell's
    # status; the cells after it still run.
    refs = faulty_workloads(tmp_path, ["", "crash", "raise", "hang", ""])
    cells = [dict(check._cell("autograd", ref, "tiny", "float64", "eager", 0), id=f"cell{i}")
             for i, ref in enumerate(refs)]
    results = framework_runner.run_framework("autograd", cells, str(tmp_path), timeout_s=5)
    assert [results[f"cell{i}"].status for i in range(5)] == ["ok", "crashed", "error", "timeout", "ok"]
    crashed = results["cell1"].message
    assert "139" in crashed and "segfault stand-in" in crashed
    assert "ValueError: a bug in the model" in results["cell2"].message
    assert "timeout of 5 s" in results["cell3"].message
    w = workloads.build(refs[0], "tiny", "float64").params["w"]
    np.testing.assert_allclose(results["cell0"].grads["w"], 2 * w)  # d/dw sum(w * w)


def test_an_unavailable_mode_in_the_worker_is_reported_not_failed(tmp_path):
    # torch.compile without a C++ compiler, CUDA without a GPU: the adapter raises
    # Unavailable in load(); the row says so and does not fail the check.
    cells = [check._cell("autograd", "chained_dot", "tiny", "float64", "eager", 0)]
    (result,) = framework_runner.run_framework("autograd", cells, str(tmp_path), device="cuda").values()
    assert result.status == "unavailable" and "CUDA" in result.message
    row = check._compare_row(cells[0], "autograd", result, None)
    assert not row.failed


# ---- the command line ---------------------------------------------------------------------


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "harness", "check", *args], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(__file__)), timeout=600)


@pytest.mark.parametrize(
    "args, kind",
    [
        (["--workload", "resnet"], "workload"),
        (["--framework", "mxnet"], "framework"),
        (["--size", "huge"], "size"),
        (["--dtype", "float16"], "dtype"),
        (["--mode", "jit"], "mode"),
        (["--device", "tpu"], "device"),
    ],
)
def test_unknown_names_exit_2_listing_the_choices(args, kind):
    done = run_cli(*args)
    assert done.returncode == 2
    assert f"unknown {kind}" in done.stderr and "valid" in done.stderr


@pytest.mark.slow  # acceptance: a real `harness check` run
def test_cli_prints_the_table_and_exits_0_when_all_agree():
    done = run_cli("--workload", "shared_linear,rnn_fanout", "--framework", "autograd", "--mode", "eager,compiled")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    rows = [line.split() for line in lines if line.startswith(("shared_linear", "rnn_fanout"))]
    assert {(r[0], r[1], r[3], r[4]) for r in rows} == {
        (w, "autograd", d, "ok") for w in ("shared_linear", "rnn_fanout") for d in ("float64", "float32")
    }
    assert "autograd compiled: autograd has no compiled mode" in done.stdout
    assert "4 of 4 cells agree; 0 failed; 1 skipped" in done.stdout


def test_an_unavailable_framework_is_listed_and_the_rest_runs(monkeypatch):
    real_get = frameworks.get

    class NotInstalled(Adapter):  # what a machine without JAX sees
        name, module = "jax", "a_module_that_is_not_installed"

    monkeypatch.setattr(frameworks, "get", lambda name: NotInstalled() if name == "jax" else real_get(name))
    cells, skipped = check.plan(["chained_dot"], ["jax", "autograd"], "tiny", ["float64"], ["eager"], 0)
    assert "jax" not in cells and "autograd" in cells
    assert ("jax", "all", "a_module_that_is_not_installed is not installed (pip install 'gradmem[jax]')") in skipped
    table = check.format_table([], skipped, "tiny", "cpu")
    assert "jax: a_module_that_is_not_installed is not installed" in table


def test_plan_rejects_nothing_it_cannot_name():
    with pytest.raises(ChoiceError):
        check.plan(["chained_dot"], ["mxnet"], "tiny", ["float64"], ["eager"], 0)


def test_jobs_below_one_exit_2():
    done = run_cli("--jobs", "0")
    assert done.returncode == 2 and "--jobs must be at least 1, got 0" in done.stderr
