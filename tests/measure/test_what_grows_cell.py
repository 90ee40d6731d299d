"""tools/leak_reports/what_grows_cell.py: what a built-in cell's step keeps per step, in the
mode asked for (the docs name torch 2.1.0's compiled tiny_nerf graphs with it)."""

import json
import os
import subprocess
import sys

import pytest

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "leak_reports", "what_grows_cell.py")


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_it_measures_the_cell_in_the_mode_asked_and_names_it(mode):
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, TOOL, "torch", "chained_dot", "tiny", "--steps", "2", "--mode", mode],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cell"] == f"torch chained_dot tiny {mode}" and found["steps"] == 2
    # the two figures a report quotes: own pages a step, and the object types that gained some
    assert isinstance(found["own_bytes_per_step"], float) and isinstance(found["objects_per_step"], dict)


def test_a_mode_outside_the_choices_is_one_error_naming_them():
    done = subprocess.run([sys.executable, TOOL, "torch", "chained_dot", "--mode", "jit"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "choose from 'eager', 'compiled'" in done.stderr


def test_own_pages_are_read_settled_as_the_leak_phase_reads_them(monkeypatch):
    """Read untrimmed, the heap glibc keeps free counts as kept: torch 2.1's compiled
    transformer_block read 2.8 MB a step so, where its leak phase (gc, then malloc_trim
    before each reading) reads 61-71 KiB. Each reading must come after a settle."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("what_grows_cell", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    calls = []
    monkeypatch.setattr(tool.probes, "settle", lambda: calls.append("settle"))
    monkeypatch.setattr(tool.probes, "status_bytes",
                        lambda: calls.append("read") or {"RssAnon": 4096, "RssShmem": 0})
    assert tool.own_bytes() == 4096
    assert calls == ["settle", "read"]
