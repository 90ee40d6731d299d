"""The probe every standalone script carries measures what docs/measurement.md defines.

Run as a script carries it (its source from the marker on, in a fresh interpreter with
the memory environment set), around a NumPy step whose bytes are known: the forward
makes and drops a 32 MiB buffer, the first backward keeps a 16 MiB one for good.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from harness.measure import leak
from harness.upstream import probe, runner, script

from harness.units import MIB

STEP = '''
import numpy as np

KEPT = []


def forward(params, inputs):
    transient = np.ones(32 * 2**20 // 8)  # written, so resident; dropped when forward returns
    return float(transient[0])


def backward(state):
    if not KEPT:
        KEPT.append(np.ones(16 * 2**20 // 8))  # kept between steps from the first step on
    return {"g": state}


figures, samples = measure((forward, backward), {}, {}, lambda tree: tree)
report(figures, samples, "retained", ["numpy"], ENVIRONMENT)
'''


def test_the_probe_reads_a_planted_peak_and_a_planted_kept_buffer(tmp_path):
    path = tmp_path / "probe_run.py"
    header = ("import os, sys\nENVIRONMENT = {'MALLOC_MMAP_THRESHOLD_': '32768'}\n"
              "if any(os.environ.get(k) != v for k, v in ENVIRONMENT.items()):\n"
              "    os.execve(sys.executable, sys.orig_argv, {**os.environ, **ENVIRONMENT})\n")
    path.write_text(header + script.probe_source() + STEP)
    done = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    figures = printed["figures"]
    # the 32 MiB buffer is the forward's peak above the step's start, every step
    assert abs(figures["step_peak.forward"] - 32 * MIB) < 0.05 * 32 * MIB, figures
    assert abs(figures["first_step_peak.forward"] - 32 * MIB) < 0.05 * 32 * MIB, figures
    # the 16 MiB kept from the first backward on: own pages at a steady step's start, none at the first's
    assert abs(figures["retained"] - 16 * MIB) < 0.05 * 16 * MIB, figures
    assert abs(figures["first_step_retained"]) < MIB, figures
    assert figures["footprint"] == figures["retained"] + figures["step_peak"]
    assert len(printed["steady_samples"]) == 3
    assert printed["environment"] == {"MALLOC_MMAP_THRESHOLD_": "32768"}  # set before the interpreter started
    assert "harness" not in printed["modules"] and "numpy" in printed["modules"]
    assert done.stderr.strip().endswith(f"retained: {figures['retained'] / MIB:.2f} MiB")


@pytest.mark.slow  # 40 s on the loaded 2-core machine: torch imported twice (the script runs itself again)
def test_a_generated_script_runs_with_the_framework_alone_and_reports_its_modules(tmp_path):
    # torch eager at tiny, under this interpreter: isolated (-I), from an empty folder, with a
    # bare environment, as the runner starts it; gradmem is importable here, yet not imported
    pytest.importorskip("torch")
    spec = script.Spec("torch", "chained_dot", "eager", "tiny", "float32", "step_peak", "a test")
    path = tmp_path / "repro.py"
    path.write_text(script.write(spec))
    status, printed, message, _ = runner.run_once(sys.executable, str(path), timeout_s=300)
    assert status == "ok", message
    # tiny chained_dot: 5 products of a 32 x 32 float32 matrix; the bound is 4 of them (16 KiB), far
    # under a page's grain of RSS, so the figures are small, and present for every phase
    assert set(printed["figures"]) >= {"retained", "step_peak", "step_peak.forward", "step_peak.backward",
                                       "footprint", "first_step_peak", "first_step_footprint"}
    assert "torch" in printed["modules"] and "harness" not in printed["modules"]
    assert printed["environment"]["MALLOC_MMAP_THRESHOLD_"] == "32768"


GROWING_STEP = '''
import numpy as np

KEPT = []


def forward(params, inputs):
    return 1.0


def backward(state):
    if PLANTED:  # PLANTED bytes a step, written (so resident) and kept for good: a leak
        KEPT.append(np.ones(PLANTED // 8))
    return {"g": state}


figures, samples = measure((forward, backward), {}, {}, lambda tree: tree, steps=GROWTH_STEPS)
figures = with_growth(figures, samples)
report_growth(figures, samples, "leak", ["numpy"], ENVIRONMENT)
'''


@pytest.mark.parametrize("planted", [0, 256 * 1024])
def test_the_growth_probe_reads_a_planted_leak_and_a_step_without_one_as_flat(tmp_path, planted):
    path = tmp_path / "growth_run.py"
    header = ("import os, sys\nENVIRONMENT = {'MALLOC_MMAP_THRESHOLD_': '32768'}\n"
              "if any(os.environ.get(k) != v for k, v in ENVIRONMENT.items()):\n"
              "    os.execve(sys.executable, sys.orig_argv, {**os.environ, **ENVIRONMENT})\n"
              f"PLANTED = {planted}\n")
    path.write_text(header + script.probe_source(growth=True) + GROWING_STEP)
    done = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(printed["steady_samples"]) == probe.GROWTH_STEPS
    # 256 KiB of written pages kept a step: own pages grow by that (plus a page of the array's
    # header now and then: 1.6 % at most over the leak phase's planted runs, docs/measurement.md);
    # without it, flat within the 8 KiB a step that the leak phase's rule calls growth
    assert abs(printed["figures"]["leak"] - planted) <= (0.05 * planted or 8192), printed["figures"]["leak"]
    assert f"leak: {printed['figures']['leak'] / 1024:.1f} KiB a step" in done.stderr
    # retained is one of the first three steady steps' (their median by step peak), as a script
    # of three steps reads it: 2, 3 or 4 steps' worth kept at their starts (the cold step and the
    # warm-up keep theirs too), where the 24 steps' median step would carry 12 or more
    assert 2 * planted - 64 * 1024 <= printed["figures"]["retained"] <= 1.05 * 4 * planted + 64 * 1024, printed["figures"]
    assert printed["figure"] == "retained"  # the memory figure beside it, printed in MiB


def test_growth_per_step_is_the_leak_phases_figure():
    # the slope of the second half, as harness/measure/leak.py judges a run, over its longer
    # run's readings (the probe is standard library only: it states the number, this checks it)
    assert probe.GROWTH_STEPS == leak.LONG
    rng = np.random.default_rng(0)
    for n in (24, 23, 9, 2):
        readings = [int(v) for v in rng.integers(0, 1 << 20, n) + 40_000 * np.arange(n)]
        assert probe.growth_per_step(readings) == leak.judge(list(enumerate(readings)))["bytes_per_step"]


def test_only_a_growth_change_s_script_carries_the_growth_probe():
    # every other script keeps the text its runs were measured with (a run is held by its script's hash)
    plain = script.write(script.Spec("torch", "chained_dot", "eager", "tiny", "float32", "retained", "a test"))
    growing = script.write(script.Spec("torch", "chained_dot", "eager", "tiny", "float32", "leak", "a test",
                                       growth=True))
    assert "growth_per_step" not in plain and "GROWTH_STEPS" not in plain
    assert "measure(step, params, inputs, sync, steps=GROWTH_STEPS)" in growing
    assert "def growth_per_step" in growing and "figures = with_growth(figures, samples)" in growing
    assert "report_growth(figures, samples, FIGURE" in growing
