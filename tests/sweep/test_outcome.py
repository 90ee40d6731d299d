"""`harness run`'s exit status says whether the sweep measured what it was asked: 0 when
no cell failed (`unavailable` is not a failure), 4 when some failed, 3 when none was
measured, the counts printed (harness/sweep/outcome.py)."""

import os
import subprocess
import sys

import pytest

from harness import cli, results
from harness.measure.marks import PLANT_VAR
from harness.sweep import outcome, schedule

CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
        "mode": "eager", "device": "cpu"}


def record(status, **cell):
    return results.new_record({**CELL, **cell}, status, "" if status == "ok" else f"why {status}")


@pytest.mark.parametrize("statuses, code", [
    (["ok", "ok"], outcome.OK),
    (["ok", "unavailable"], outcome.OK),
    (["unavailable", "unavailable"], outcome.OK),  # this machine lacks them: not a failure
    ([], outcome.OK),  # --resume with nothing left to measure
    (["ok", "timeout", "unavailable"], outcome.SOME_FAILED),
    (["oom", "error", "unavailable"], outcome.NONE_MEASURED),
    (["timeout"], outcome.NONE_MEASURED),
])
def test_the_status_follows_the_cells(statuses, code):
    assert outcome.judge([record(s) for s in statuses])[0] == code


def test_the_line_counts_what_failed_and_what_was_measured():
    code, line = outcome.judge([record("ok"), record("timeout"), record("timeout"), record("oom"),
                                record("unavailable")])
    assert code == 4
    assert "3 of 5 cells failed (1 oom, 2 timeout), 1 measured; 1 unavailable here" in line and "exit 4" in line
    code, line = outcome.judge([record("error"), record("error")])
    assert line.startswith("error: no cell was measured: 2 of 2 failed (2 error)") and "exit 3" in line


@pytest.mark.parametrize("statuses, code", [(["error", "timeout"], 3), (["ok", "oom"], 4), (["ok", "unavailable"], 0)])
def test_the_command_exits_with_it_even_when_quiet(statuses, code, monkeypatch, tmp_path, capsys):
    # the sweep's own path from its records to its exit status, the workers left out
    def measured(todo, runner, executor, emit, kind, budget=None):
        for index, (cell, status) in enumerate(zip(todo, statuses)):
            emit(index, results.new_record(cell, status, "" if status == "ok" else "planted"))

    monkeypatch.setattr(schedule, "run", measured)
    out = tmp_path / "r.jsonl"
    assert cli.main(["run", "--workload", "chained_dot,rnn_fanout", "--framework", "reference", "--size",
                     "tiny", "--quiet", "--out", str(out)]) == code
    err = capsys.readouterr().err
    assert (f"(exit {code})" in err) == (code != 0), err
    assert len(results.read_records(out)) == 2


def test_a_sweep_whose_only_cell_failed_exits_3(tmp_path):
    # a real worker, its error planted: the sweep used to exit 0
    out = tmp_path / "r.jsonl"
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--workload", "chained_dot", "--framework",
                           "reference", "--size", "tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, PLANT_VAR: "error:forward"})
    assert done.returncode == 3, done.stderr
    assert "no cell was measured: 1 of 1 failed (1 error)" in done.stderr
    assert [r["status"] for r in results.read_records(out)] == ["error"]
