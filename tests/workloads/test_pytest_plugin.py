"""The step_memory marker (harness/pytest_plugin.py), run by pytest's own pytester."""

import os
import tomllib

import pytest

from harness import pytest_plugin, workloads

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# shared_linear at tiny, reference engine, float32: its bound is 960 bytes
# (tests/workloads/test_derived_bound.py); the step peak is a few KiB of RSS pages.
BOUND = workloads.bound_bytes("shared_linear", "tiny", "float32")


def test_the_entry_point_is_declared():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["entry-points"]["pytest11"] == {"gradmem": "harness.pytest_plugin"}


def test_limits_parse():
    assert pytest_plugin.parse_limit("64 MiB", 1) == 64 << 20
    assert pytest_plugin.parse_limit("512M", 1) == 512 << 20
    assert pytest_plugin.parse_limit(4096, 1) == 4096
    assert pytest_plugin.parse_limit("1.5x bound", 1000) == 1500
    with pytest.raises(pytest.UsageError, match="1.2x bound"):
        pytest_plugin.parse_limit("lots", 1)


@pytest.mark.slow  # acceptance: a real measurement under pytester
def test_the_marker_passes_and_fails_as_it_should(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    # loaded by name, not by the entry point: the run is the same whether or not this
    # checkout's install has registered it yet (the test above checks the declaration)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.step_memory(workload="shared_linear", framework="reference", limit="64 MiB", retained="256 MiB")
        def test_fits():
            pass

        # small, not tiny: tiny's saved activations (960 B) fit in the heap's free pages
        # and RSS saw no step peak at all in one CI run; small's 1 MiB of activations are
        # mmap'd pages, four times the 256 KiB grain
        @pytest.mark.step_memory(workload="shared_linear", framework="reference", limit="0.5x bound", size="small")
        def test_too_tight():
            pass

        @pytest.mark.step_memory(workload="shared_linear", framework="reference", retained=1)
        def test_retained_too_tight():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "-q")
    result.assert_outcomes(passed=1, failed=2)
    # a half-the-bound limit cannot hold: the step keeps at least the saved activations
    result.stdout.fnmatch_lines([
        "*step_memory: reference eager cpu on shared_linear at small float32: step peak * > limit 0.5x bound (0.500 MiB)*",
        "*saved_activations*",
        "*retained * > limit 1 *",
    ])


LEAKY_STEP = '''
import autograd.numpy as np
from autograd import grad

FRAMEWORK = "autograd"
SIZES = {"tiny": {"D": 16}, "small": {"D": 16}}
LEAK_BYTES = %d
_kept = []


def setup(cfg):
    return {"w": np.ones((cfg["D"], cfg["D"])), "grad": grad(lambda w: np.sum(np.tanh(w)))}


def step(state):
    if LEAK_BYTES:
        _kept.append(bytearray(b"\\x01") * LEAK_BYTES)  # resident and never let go
    state["w"] = state["w"] - 1e-3 * state["grad"](state["w"])
'''


@pytest.mark.slow  # acceptance: two real measurements under pytester
def test_the_leak_gate_fails_a_step_that_grows_and_passes_one_that_does_not(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(leaky_step=LEAKY_STEP % (256 * 1024), flat_step=LEAKY_STEP % 0)
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.step_memory(workload="leaky_step.py", leak="0 B")
        def test_leaky():
            pass

        @pytest.mark.step_memory(workload="flat_step.py", leak="0 B")
        def test_flat():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "harness.pytest_plugin", "-q")
    result.assert_outcomes(passed=1, failed=1)
    # the failure names the growth it measured: 256 KiB a step, and the mmap's page and header (260)
    result.stdout.re_match_lines([r".*test_leaky.*", r".*grows 2[5-7][0-9]\.[0-9] KiB a step over \d+ steps.*"],
                                 consecutive=False)


def test_one_cell_is_measured_once_per_process_and_again_when_its_file_changes(tmp_path, monkeypatch):
    from harness import pytest_plugin

    swept = []
    monkeypatch.setattr(pytest_plugin, "_measured", {})
    monkeypatch.setattr(pytest_plugin, "_sweep_of_one", lambda *cell: swept.append(cell) or {"n": len(swept)})
    step = tmp_path / "step.py"
    step.write_text("x = 1\n")
    first = pytest_plugin.measure(str(step), "torch", size="small")
    assert pytest_plugin.measure(str(step), "torch", size="small") is first  # another gate, the same record
    pytest_plugin.measure(str(step), "torch", size="tiny")  # another cell
    step.write_text("x = 22\n")  # the step changed: measured again
    pytest_plugin.measure(str(step), "torch", size="small")
    monkeypatch.setenv("GRADMEM_THREADS", "1")  # another environment: measured again
    pytest_plugin.measure(str(step), "torch", size="small")
    assert [cell[2] for cell in swept] == ["small", "tiny", "small", "small"]
