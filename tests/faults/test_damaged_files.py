"""A result file with damaged lines (cut short, hand-edited, garbage, another schema):
every reader (the report, the asv loader, --resume) names each bad line with its file
and line, skips it, and uses every other record. (The regression gate reads asv's
own result files: tests/asv/test_gate.py::test_a_damaged_result_file_is_named_and_skipped.)"""

import json
import sys

import pytest

from harness import results
from harness.cli import main as cli_main
from harness.report import records as report_records

from fault_helpers import PROJECT

sys.path.insert(0, str(PROJECT / "tests" / "report"))
sys.path.insert(0, str(PROJECT / "benchmarks"))
from report_fixtures import fixture_record  # noqa: E402


def damaged_file(path):
    good = [fixture_record("chained_dot", schema=results.SCHEMA), fixture_record("unet", "torch", schema=results.SCHEMA)]
    newer = fixture_record("rnn_fanout", schema=results.SCHEMA + 1)
    older = fixture_record("rnn_fanout", schema=results.SCHEMA - 1)
    no_status = {k: v for k, v in good[0].items() if k != "status"}
    cut = json.dumps(good[1])[:200]
    lines = [
        json.dumps(good[0]),            # 1
        cut,                            # 2: a truncated write
        b"\x00\x9f\xff garbage",         # 3: not even UTF-8
        "",                             # 4: a blank line is neither a record nor damage
        json.dumps(newer),              # 5
        json.dumps(older),              # 6
        json.dumps(no_status),          # 7: a hand edit
        json.dumps([1, 2]),             # 8
        json.dumps(good[1]),            # 9
    ]
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return path


EXPECTED = {
    2: "not a JSON record",
    3: "not a JSON record",
    5: f"record of schema {results.SCHEMA + 1}, but this gradmem reads schema {results.SCHEMA}: it was written by a newer gradmem",
    6: f"record of schema {results.SCHEMA - 1}, but this gradmem reads schema {results.SCHEMA}: it was written by an older gradmem",
    7: "record lacks 'status'",
    8: "a record is a JSON object, got list",
}


def assert_named(path, err):
    for line, reason in EXPECTED.items():
        assert f"{path}:{line}: {reason}" in err, (line, err)
    assert "6 damaged line(s) in 1 file(s) skipped" in err


def test_the_report_names_each_damaged_line_and_uses_every_other_record(tmp_path, capsys):
    path = damaged_file(tmp_path / "r.jsonl")
    loaded = report_records.load([str(path)])
    assert [(r["workload"], r["framework"]) for r in loaded] == [("chained_dot", "reference"), ("unet", "torch")]
    assert_named(path, capsys.readouterr().err)

    assert cli_main(["report", str(path), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert "chained_dot" in page and "unet" in page
    assert_named(path, capsys.readouterr().err)


def test_the_asv_loader_names_each_damaged_line_and_uses_every_other_record(tmp_path, capsys, monkeypatch):
    import common  # benchmarks/common.py

    path = damaged_file(tmp_path / "r.jsonl")
    monkeypatch.setenv("GRADMEM_ASV_RECORDS", str(path))
    monkeypatch.setenv("GRADMEM_ASV_SIZE", "tiny")
    monkeypatch.setenv("GRADMEM_ASV_OPTIMIZER", "none")
    cache = common.sweep()
    assert set(cache) == {("chained_dot", "reference", "cpu", "eager"), ("unet", "torch", "cpu", "eager")}
    assert_named(path, capsys.readouterr().err)


def test_a_strict_read_still_refuses_a_damaged_file(tmp_path):
    path = damaged_file(tmp_path / "r.jsonl")
    with pytest.raises(results.RecordFileError, match=f"^{path}:2: not a JSON record"):
        results.read_records(path)
