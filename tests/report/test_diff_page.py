"""The saved-by-op table of the comparison page and the `harness diff --html` page:
static, they open from disk in headless Chromium with a clean console and show what
they should. Records are constructed (report_fixtures.py): the figures are made up."""

import pytest

from harness import cli
from harness.report.page import write_page

import chromium_cdp
from report_fixtures import MIB, fixture_record, write_jsonl

pytestmark = pytest.mark.skipif(
    chromium_cdp.find_chromium() is None,
    reason="no chromium on PATH; run tools/ensure_chromium.sh (apt-get install chromium)",
)


def _saved(ops, method="made up by the fixture"):
    rows = {op: {"bytes": b, "count": c, "names": names, "in_op_set": not op[0].isupper()}
            for op, (b, c, names) in ops.items()}
    total = sum(r["bytes"] for r in rows.values())
    return {"ops": rows, "bytes": total, "method": method, "saved_activations_bytes": total, "backward": None}


def _records():
    return [
        fixture_record("rnn_fanout", "reference", saved_by_op=_saved(
            {"tanh": (3 * MIB, 50, ["tanh"]), "exp": (64, 1, ["exp"])})),
        fixture_record("rnn_fanout", "torch", peak_bytes={"forward": 8 * MIB, "backward": 40 * MIB, "total": 40 * MIB},
                       breakdown_bytes={"params": MIB, "inputs": MIB, "gradients": MIB, "optimizer_state": 0,
                                        "saved_activations": 5 * MIB, "temporaries": 33 * MIB},
                       saved_by_op=_saved({"tanh": (3 * MIB, 50, ["TanhBackward0"]), "matmul": (MIB, 50, ["MmBackward0"]),
                                           "CompiledFunctionBackward": (5, 1, ["CompiledFunctionBackward"])})),
        fixture_record("rnn_fanout", "tensorflow", saved_by_op={
            "ops": None, "bytes": None, "method": "the tensorflow adapter has no way to tell which op made a saved "
            "buffer", "saved_activations_bytes": None, "backward": None}),
    ]


SAVED_PROBE = """({
  tables: document.querySelectorAll('table.saved-by-op').length,
  ops: [...document.querySelectorAll('table.saved-by-op tbody th.op')].map(e => e.textContent),
  tanh: [...document.querySelectorAll('table.saved-by-op tbody tr')].filter(r => r.querySelector('th').textContent == 'tanh')
        .map(r => [...r.querySelectorAll('td')].map(td => td.textContent))[0],
  tooltip: document.querySelector('table.saved-by-op td[title]').getAttribute('title'),
})"""


def test_the_comparison_page_lines_up_saved_bytes_by_op(tmp_path):
    page = write_page([str(write_jsonl(tmp_path / "r.jsonl", _records()))], str(tmp_path / "site"))
    seen = chromium_cdp.inspect_page(f"file://{page}", SAVED_PROBE, screenshot=str(tmp_path / "page.png"))
    assert seen["problems"] == []
    value = seen["value"]
    assert value["tables"] == 1
    # biggest first; an op with no counterpart keeps its own name, marked *
    assert value["ops"] == ["tanh", "matmul", "exp", "CompiledFunctionBackward *"]
    # one row, one column per cell: the two lists line up; tensorflow says it cannot see
    assert value["tanh"] == ["3 MiB ×50", "3 MiB ×50", "–"]
    assert value["tooltip"] == "tanh"


DIFF_PROBE = """({
  title: document.title,
  sections: [...document.querySelectorAll('h2')].map(e => e.textContent),
  rest: document.querySelector('tr.rest td:last-child').textContent,
  ops: [...document.querySelectorAll('section:nth-of-type(5) tbody th')].map(e => e.textContent),
})"""


def test_the_diff_page_opens_from_disk(tmp_path):
    results = write_jsonl(tmp_path / "r.jsonl", _records())
    out = tmp_path / "diff" / "index.html"
    assert cli.main(["diff", str(results), "--a", "framework=reference", "--b", "framework=torch",
                     "--html", str(out)]) == 0
    seen = chromium_cdp.inspect_page(f"file://{out}", DIFF_PROBE, screenshot=str(tmp_path / "diff.png"))
    assert seen["problems"] == []
    value = seen["value"]
    assert value["title"] == "gradmem diff"
    assert value["sections"][0] == "Figures"
    assert value["sections"][1] == "Step peak difference by category: +34 MiB"
    # saved activations +1 MiB (matmul, and 5 B of CompiledFunctionBackward), gradients 0: the rest is
    # 34 MiB - that, said as not explained, not zeroed
    assert value["rest"] == "+33 MiB"
    assert "Saved activations by op" in value["sections"]
    assert "Which layer changed" in value["sections"]
