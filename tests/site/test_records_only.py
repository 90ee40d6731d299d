"""The site and the report read records only: a sweep's schedule log beside its records
(tools/gpu_sweep.sh writes OUT/schedule-N.jsonl) is told by its lines and left out, not
read as 100 damaged records; a damaged record file is still named line by line."""

import json
import pathlib

from harness import cli, results
from harness.site import comparisons
from harness.sweep.pass_log import is_pass_log

ROOT = pathlib.Path(__file__).resolve().parents[2]
CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "reference",
        "mode": "compiled", "device": "cuda"}
#: lines of a committed schedule log, as harness run --schedule-log writes them
LOG = [
    {"pass": "reference_gradient", "cell": "unet reference eager cuda small float32", "started_s": 1.3205,
     "ended_s": 1.4149, "status": "ok", "worker_s": 0.0944, "marks": [[0.0038, "start"], [0.0843, "exit"]]},
    {"pass": "memory", "cell": "unet torch eager cuda small float32", "started_s": 1.5, "ended_s": 9.0,
     "status": "ok", "worker_s": 7.1, "marks": []},
    {"sweep": {"schedule": "parallel", "jobs": 8, "cells": 2, "wall_s": 10.2}},
]


def write_run(root):
    run = root / "results" / "gpu" / "2026-01-01-gpu"
    run.mkdir(parents=True)
    (root / "results" / "cpu").mkdir()
    record = results.new_record(CELL, "unavailable", "the reference engine has no compiled mode")
    (run / "cuda.jsonl").write_text(results.dumps(record))
    (run / "schedule-1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in LOG))
    # a log cut short by a killed sweep is still a log
    (run / "schedule-2.jsonl").write_text(json.dumps(LOG[0]) + "\n" + json.dumps(LOG[1])[:40])
    return run


def test_a_schedule_log_beside_the_records_is_left_out_without_a_warning(tmp_path, capsys):
    run = write_run(tmp_path)
    (record_set,) = comparisons.find(str(tmp_path))
    assert record_set.files == ["results/gpu/2026-01-01-gpu/cuda.jsonl"] and len(record_set.records) == 1
    assert capsys.readouterr().err == ""
    assert is_pass_log(run / "schedule-1.jsonl") and is_pass_log(run / "schedule-2.jsonl")
    assert not is_pass_log(run / "cuda.jsonl")


def test_a_damaged_record_file_is_still_read_and_named(tmp_path, capsys):
    run = write_run(tmp_path)
    good = (run / "cuda.jsonl").read_text()
    (run / "cuda.jsonl").write_text(good + '{"workload": "unet", "status": "ok"}\n' + good[:30])
    assert not is_pass_log(run / "cuda.jsonl")
    (record_set,) = comparisons.find(str(tmp_path))
    assert len(record_set.records) == 1
    err = capsys.readouterr().err
    assert "cuda.jsonl:2: record has no 'schema' key" in err and "cuda.jsonl:3: not a JSON record" in err


def test_the_repository_s_records_are_read_without_a_warning(capsys):
    # results/gpu/2026-11-27-h200-endgame holds schedule-1.jsonl and schedule-2.jsonl
    # beside cuda.jsonl: they were read as 151 damaged records
    assert list((ROOT / "results" / "gpu").glob("*/schedule-*.jsonl"))
    found = comparisons.find(str(ROOT))
    assert found and all("schedule-" not in f for s in found for f in s.files)
    assert capsys.readouterr().err == ""


def test_the_report_refuses_a_schedule_log_in_one_line(tmp_path, capsys):
    run = write_run(tmp_path)
    assert cli.main(["report", str(run / "schedule-1.jsonl"), "--out", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a schedule log (harness run --schedule-log" in err
    assert not (tmp_path / "page").exists()


def test_the_report_of_a_run_folder_leaves_its_schedule_log_out_with_a_note(tmp_path, capsys):
    run = write_run(tmp_path)
    files = sorted(str(p) for p in run.glob("*.jsonl"))
    assert cli.main(["report", *files, "--out", str(tmp_path / "page")]) == 0
    err = capsys.readouterr().err
    assert err.count("a schedule log") == 2 and "damaged" not in err, err
    assert (tmp_path / "page" / "index.html").exists()
