"""Native steps without a worker: what makes a file one, its contract, its cells, the
templates, and every bad input said in one line (harness/steps/contract.py)."""

import os
import subprocess
import sys
import textwrap

import pytest

from harness import frameworks, workloads
from harness.choices import ChoiceError
from harness.steps import contract, runner, templates
from harness.sweep import cells
from harness.workloads import loader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A native step that needs no framework at all (the reference row, NumPy only): what
# the contract and the loader see is the same for every framework.
PLAIN = textwrap.dedent('''
    import numpy as np

    FRAMEWORK = "reference"
    SIZES = {"tiny": {"B": 4}, "small": {"B": 64}}
    BATCH_AXIS = "B"

    def setup(cfg):
        return {"x": np.ones((cfg["B"], 8), dtype=cfg["dtype"])}

    def step(state):
        return float((state["x"] @ state["x"].T).sum())
''')


def write(tmp_path, text, name="my_step.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_native_step_is_told_apart_by_what_it_defines(tmp_path):
    ref = workloads.resolve(write(tmp_path, PLAIN))
    step = workloads.native(ref)
    assert step is not None and step.FRAMEWORK == "reference" and step.BATCH_AXIS == "B"
    assert workloads.native("chained_dot") is None
    # the config setup() gets: the size's, with the cell's device and dtype
    assert workloads.config(ref, "tiny") == {"B": 4, "device": "cpu", "dtype": "float32"}
    assert workloads.bound_with_source(ref, "tiny", "float32") == (None, contract.NO_BOUND)
    with pytest.raises(ChoiceError, match="native step"):
        workloads.build(ref, "tiny", "float32")


def test_the_command_reads_a_step_without_importing_its_framework(tmp_path):
    # the parent of every command never imports a framework (docs/design.md): a
    # native step imports its own at the top, so the loader reads the file instead
    path = write(tmp_path, templates.render("tensorflow", "my_step", "my_step.py"))
    probe = ("import sys; from harness import workloads, frameworks; "
             f"step = workloads.native(workloads.resolve({path!r})); "
             "print(step.FRAMEWORK, sorted(n for n in frameworks.NAMES if n in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["tensorflow", "[]"]


@pytest.mark.parametrize("framework", sorted(templates.TEMPLATES))
def test_every_template_keeps_the_contract(tmp_path, framework):
    path = write(tmp_path, templates.render(framework, "my_step", "my_step.py"))
    step = workloads.native(workloads.resolve(path))
    assert step.FRAMEWORK == framework and framework in frameworks.NAMES
    assert contract.sizes(step) == ("tiny", "small") and callable(step.setup) and callable(step.step)
    compile(open(path).read(), path, "exec")  # the whole file, not only what the loader reads


@pytest.mark.parametrize("text, expected", [
    (PLAIN.replace("def step(state):", "def other(state):"), "step is missing"),
    (PLAIN.replace('FRAMEWORK = "reference"', 'FRAMEWORK = "caffe"'), "FRAMEWORK 'caffe' is not a framework"),
    (PLAIN.replace('"tiny": {"B": 4}', '"huge": {"B": 4}'), "SIZES has 'huge': a size is one of tiny, small, paper"),
    (PLAIN.replace('{"B": 64}', '{"B": 64, "device": "cpu"}'), "uses device: the harness sets those keys"),
    (PLAIN.replace('{"B": 64}', '{"N": 64}'), "SIZES['small'] has no key 'B' (BATCH_AXIS)"),
    ('SIZES = {"tiny": {}}\n', "defines neither an op-set workload's init and loss nor a native step's"),
])
def test_a_broken_step_is_named_piece_by_piece(tmp_path, text, expected):
    with pytest.raises(loader.WorkloadError, match=expected.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        workloads.resolve(write(tmp_path, text))


def test_a_step_is_a_cell_only_in_its_own_row(tmp_path):
    ref = workloads.resolve(write(tmp_path, templates.render("torch", "my_step", "my_step.py")))
    todo = cells.expand([ref, "chained_dot"], ["reference", "torch", "jax"], ["tiny"], ["float32"], ["cpu"],
                        ["eager", "compiled"], optimizer="adam", orders=("heap", "bfs"))
    mine = [c for c in todo if c["workload"] == ref]
    # one cell: torch, eager, its own optimizer (none from the command line), no order
    assert [(c["framework"], c["mode"], c["optimizer"], c["order"]) for c in mine] == [("torch", "eager", None, None)]
    # the op-set workload keeps every row: reference (2 orders) + torch + jax, two modes
    assert len([c for c in todo if c["workload"] == "chained_dot"]) == 2 * (2 + 1 + 1)
    with pytest.raises(ChoiceError, match="native torch step: its one row is --framework torch --mode eager"):
        cells.expand([ref], ["jax"], ["tiny"], ["float32"], ["cpu"], ["eager"])
    with pytest.raises(ChoiceError, match="has no size 'paper'; its sizes: tiny, small"):
        cells.expand([ref], ["torch"], ["paper"], ["float32"], ["cpu"], ["eager"])


def test_setup_that_raises_is_one_line_naming_the_file_and_line(tmp_path):
    text = PLAIN.replace('    return {"x"', '    raise ValueError("no data here")\n    return {"x"')
    line = text.splitlines().index('    raise ValueError("no data here")') + 1
    path = write(tmp_path, text)
    cell = {"workload": workloads.resolve(path), "size": "tiny", "dtype": "float32", "device": "cpu"}
    with pytest.raises(runner.StepError) as caught:
        runner.build(frameworks.get("reference"), cell)
    assert str(caught.value) == f"native step my_step: setup() raised ValueError: no data here (my_step.py line {line})"


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_bad_input_exits_2_with_one_line(tmp_path):
    no_step = write(tmp_path, PLAIN.replace("def step(state):", "def other(state):"), "no_step.py")
    unknown = write(tmp_path, PLAIN.replace('"reference"', '"caffe"'), "unknown.py")
    plain = write(tmp_path, PLAIN, "plain.py")
    out = str(tmp_path / "r.jsonl")
    for args, expected in [
        (("run", "--workload", no_step, "--framework", "reference", "--size", "tiny"), "step is missing"),
        (("run", "--workload", unknown, "--framework", "reference", "--size", "tiny"), "FRAMEWORK 'caffe'"),
        (("run", "--workload", plain, "--framework", "reference", "--size", "paper"), "has no size 'paper'"),
        (("run", "--workload", plain, "--framework", "torch", "--size", "tiny"), "its one row is --framework reference"),
        (("check", "--workload", plain, "--size", "tiny"), "is a native step: its gradient is its own code's"),
        (("new-step", str(tmp_path / "x"), "--framework", "caffe"), "valid frameworks: torch, jax"),
        (("new-step", str(tmp_path / "no" / "such" / "dir" / "x")), "cannot write"),
    ]:
        done = run_cli(*args, *(("--out", out) if args[0] == "run" else ()))
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (args, done.stderr)
    assert not os.path.exists(out)  # nothing ran


def test_new_step_writes_a_file_and_refuses_to_overwrite_it(tmp_path):
    done = run_cli("new-step", str(tmp_path / "my_step"), "--framework", "jax")
    assert done.returncode == 0, done.stderr
    assert 'FRAMEWORK = "jax"' in (tmp_path / "my_step.py").read_text()
    again = run_cli("new-step", str(tmp_path / "my_step.py"))
    assert again.returncode == 2 and "exists (--force overwrites it)" in again.stderr
