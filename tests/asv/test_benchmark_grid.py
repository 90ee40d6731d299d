"""benchmarks/common.py: its hard-coded grid matches the registries, its environment
selection names the valid choices, and a missing figure is NaN, never a number."""

import math

import pytest

from benchmarks import common
from harness import choices, frameworks, workloads


def test_grid_matches_the_registries():
    # Read from the registries' source, so that `asv find` over an old commit still imports.
    assert common.WORKLOADS == list(workloads.NAMES)
    assert common.FRAMEWORKS == list(frameworks.NAMES)
    assert common.DEVICES == list(choices.DEVICES)
    assert common.MODES == list(choices.MODES)
    assert common.SIZES == list(choices.SIZES)
    assert common.OPTIMIZERS[:-1] == list(choices.OPTIMIZERS)


def test_the_grid_does_not_import_harness(tmp_path):
    # asv imports this file in environments holding an old commit of the package (or none)
    import subprocess
    import sys

    script = ("import sys; sys.path.insert(0, sys.argv[1]); from benchmarks import common; "
              "print(len(common.FRAMEWORKS), len(common.WORKLOADS), 'harness' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script, common.CHECKOUT], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert done.stdout.split() == [str(len(frameworks.NAMES)), str(len(workloads.NAMES)), "False"]


def test_sweep_command_follows_the_environment(monkeypatch):
    monkeypatch.setenv("GRADMEM_ASV_SIZE", "tiny")
    monkeypatch.setenv("GRADMEM_ASV_FRAMEWORKS", "reference, torch")
    monkeypatch.setenv("GRADMEM_ASV_OPTIMIZER", "none")
    command = common.sweep_command("/tmp/x.jsonl")
    assert command[1:4] == ["-m", "harness", "run"]
    assert command[command.index("--size") + 1] == "tiny"
    assert command[command.index("--frameworks") + 1] == "reference,torch"
    assert command[command.index("--workloads") + 1] == ",".join(workloads.NAMES)
    assert "--optimizer" not in command
    monkeypatch.delenv("GRADMEM_ASV_SIZE")
    monkeypatch.delenv("GRADMEM_ASV_OPTIMIZER")
    command = common.sweep_command("/tmp/x.jsonl")
    assert command[command.index("--size") + 1] == "small"  # the asv default
    assert command[command.index("--optimizer") + 1] == "sgd"


@pytest.mark.parametrize("variable, value", [("GRADMEM_ASV_SIZE", "huge"), ("GRADMEM_ASV_FRAMEWORKS", "torch,mxnet")])
def test_bad_selection_names_the_valid_choices(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(common.SelectionError, match=f"{variable}: unknown .*; valid: "):
        common.sweep_command("/tmp/x.jsonl")


def test_figure_is_nan_unless_the_cell_ran_and_has_it():
    cell = ("chained_dot", "reference", "cpu", "eager")
    ok = {cell: {"status": "ok", "device": "cpu", "peak_bytes": {"total": 123, "step": None}, "device_memory": None}}
    assert common.figure(ok, cell, "step_peak") == 123
    assert math.isnan(common.figure(ok, cell, "step_peak.step"))
    assert math.isnan(common.figure(ok, cell, "allocator_step_peak"))  # a CPU cell has no device figure
    assert math.isnan(common.figure({}, cell, "step_peak"))
    failed = {cell: {"status": "oom", "device": "cpu", "peak_bytes": {"total": 123}}}
    assert math.isnan(common.figure(failed, cell, "step_peak"))


def test_a_cuda_cells_figures_are_its_allocators_not_the_hosts():
    cell = ("chained_dot", "torch", "cuda", "eager")
    record = {"status": "ok", "device": "cuda", "peak_bytes": {"total": 8192},
              "device_memory": {"peak_bytes": {"total": 52024320}, "retained_bytes": 0}}
    assert common.figure({cell: record}, cell, "step_peak") == 52024320
    assert common.figure({cell: record}, cell, "allocator_step_peak") == 52024320
    # tinygrad's records before it read its device: no figure rather than the host's
    bare = dict(record, device_memory=None)
    assert math.isnan(common.figure({cell: bare}, cell, "step_peak"))


def test_index_keeps_only_the_default_variant_of_the_asked_size(monkeypatch):
    monkeypatch.setenv("GRADMEM_ASV_SIZE", "tiny")
    monkeypatch.setenv("GRADMEM_ASV_OPTIMIZER", "sgd")
    base = {"workload": "chained_dot", "framework": "reference", "device": "cpu", "mode": "eager",
            "size": "tiny", "dtype": "float32", "optimizer": "sgd", "remat": "none", "order": "heap"}
    others = [dict(base, size="small"), dict(base, dtype="float64"), dict(base, optimizer=None),
              dict(base, remat="sqrt"), dict(base, order="bfs")]
    assert list(common.index(others + [base]).values()) == [base]
