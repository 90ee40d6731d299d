"""The leak reports' native steps (examples/steps/leaks/, docs/seeds.md "Leak reports"):
each is a well-formed native step the harness reads without importing its framework,
and each runs at tiny with the framework installed here (skipped, saying which, where
it or the model library the report used is missing). Their releases' verdicts come
from the records the docs name, not from here: these keep the files working."""

import glob
import importlib.util
import os

import pytest

from harness import workloads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEAKS = os.path.join(ROOT, "examples", "steps", "leaks")
STEPS = sorted(glob.glob(os.path.join(LEAKS, "*.py")))
#: what each file needs importable to run, beyond its framework (the report's model library)
NEEDS = {"timm_compiled_104773.py": ("timm",), "timm_eager_104773.py": ("timm",)}
#: the module each FRAMEWORK is imported as
MODULE = {"torch": "torch", "tensorflow": "tensorflow"}
#: steps that torch.compile themselves: Inductor builds C++ kernels with g++ on the first
#: step (about 20 s of CPU at tiny, minutes of wall on a loaded 2-core machine): slow
COMPILES = {"timm_compiled_104773.py", "compile_disable_149834.py", "compile_disable_149834_control.py"}
RUNS = [pytest.param(p, marks=pytest.mark.slow) if os.path.basename(p) in COMPILES else p for p in STEPS]


def test_the_three_reports_and_their_controls_are_there():
    names = {os.path.basename(p) for p in STEPS}
    assert {"timm_compiled_104773.py", "timm_eager_104773.py", "resnet50_forward_60131.py",
            "compile_disable_149834.py", "compile_disable_149834_control.py"} <= names


@pytest.mark.parametrize("path", STEPS, ids=os.path.basename)
def test_each_is_a_native_step_with_tiny_and_small(path):
    step = workloads.native(workloads.resolve(path))  # read without importing the framework
    assert step is not None, f"{path} is not read as a native step"
    assert step.FRAMEWORK in MODULE
    assert {"tiny", "small"} <= set(step.SIZES)
    assert workloads.config(workloads.resolve(path), "tiny")["device"] == "cpu"


@pytest.mark.parametrize("path", RUNS, ids=os.path.basename)
def test_each_runs_at_tiny_with_the_installed_framework(path):
    name = os.path.basename(path)
    step = workloads.native(workloads.resolve(path))
    for module in (MODULE[step.FRAMEWORK], *NEEDS.get(name, ())):
        pytest.importorskip(module, reason=f"{name} needs {module}, not installed here")
    spec = importlib.util.spec_from_file_location(f"leak_step_{name[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    state = module.setup(workloads.config(workloads.resolve(path), "tiny"))
    for _ in range(2):  # the first compiles where the file compiles; the second runs what it made
        module.step(state)
        if hasattr(module, "sync"):
            module.sync(state)
