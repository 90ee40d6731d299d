"""The release page from records (constructed, not measured: tests/report/report_fixtures.py),
written by `harness releases --page-only`: every workload's figures against the release,
the planted change marked and listed, opening from disk in headless Chromium with a
clean console."""

import json
import os
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.releases import store

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
import chromium_cdp  # noqa: E402
from report_fixtures import MIB, fixture_record, write_jsonl  # noqa: E402

RELEASES = ("1.7.0", "1.8.0", "1.9.0")
PROBE = """({
  charts: document.querySelectorAll('.charts svg').length,
  marked: document.querySelectorAll('svg circle.change').length,
  flagged: document.querySelectorAll('svg circle.flagged').length,
  rows: document.querySelectorAll('#changes tbody tr').length,
  releases: document.querySelectorAll('#releases tbody tr').length,
  starred: [...document.querySelectorAll('#releases tr.differs td.release')].map(e => e.textContent),
  width: document.querySelector('.charts').getBoundingClientRect().width,
})"""


def sweep_records():
    """2 workloads x 3 releases x 2 rounds; chained_dot's backward peak +8 MiB at 1.9.0."""
    out = []
    for workload in ("chained_dot", "unet"):
        for release in RELEASES:
            for number, wobble in ((1, 0), (2, 64 * 1024)):  # rounds 64 KiB apart
                peak = 6 * MIB + wobble + (8 * MIB if workload == "chained_dot" and release == "1.9.0" else 0)
                record = fixture_record(workload, "autograd", version=release,
                                        peak_bytes={"forward": 4 * MIB, "backward": peak, "total": peak})
                record["provenance"]["versions"]["autograd"] = release
                record["release_round"] = number
                out.append(record)
    return out


@pytest.fixture
def published(tmp_path):
    out = tmp_path / "releases"
    out.mkdir()
    write_jsonl(out / "autograd.jsonl", sweep_records())
    envs_info = {r: {"versions": {"autograd": r, "numpy": "2.4.6"}} for r in RELEASES}
    envs_info["1.7.0"] = {"versions": {"autograd": "1.7.0", "numpy": "1.26.4"},
                          "dependency_differs": {"numpy": {"pinned": "2.4.6", "installed": "1.26.4"}}}
    (out / "autograd.envs.json").write_text(json.dumps(envs_info))
    assert cli.main(["releases", "--framework", "autograd", "--out", str(out), "--page-only"]) == 0
    return out


def test_the_planted_change_is_found_with_its_evidence(published):
    document = json.loads((published / "autograd.changes.json").read_text())
    memory = [c for c in document["changes"] if not c["advisory"]]
    # the step peak, its backward phase and the footprint moved; nothing of unet, nothing before 1.9.0
    assert sorted(c["figure"] for c in memory) == ["footprint", "step_peak", "step_peak.backward"]
    assert {(c["workload"], c["before_release"], c["release"], c["direction"]) for c in memory} == {
        ("chained_dot", "1.8.0", "1.9.0", "up")}
    step = next(c for c in memory if c["figure"] == "step_peak")
    assert step["delta"] == 8 * MIB and step["band"] == 256 * 1024  # spread 64 KiB < the grain floor
    assert step["parts"]["phase"] == {"forward": 0, "backward": 8 * MIB}
    assert step["dependencies_differ"] == {}  # 1.8.0 and 1.9.0 share NumPy 2.4.6
    assert any(f["workload"] == "unet" and f["figure"] == "step_peak" for f in document["flat"])


@pytest.mark.skipif(chromium_cdp.find_chromium() is None,
                    reason="no chromium on PATH; run tools/ensure_chromium.sh (apt-get install chromium)")
@pytest.mark.slow
def test_the_page_opens_from_disk_with_the_change_marked(published, tmp_path):
    page = published / "autograd.html"
    seen = chromium_cdp.inspect_page(f"file://{page}", PROBE, screenshot=str(tmp_path / "page.png"))
    assert seen["problems"] == []
    value = seen["value"]
    assert value["charts"] == 2 * 9  # 2 workloads x 1 mode x 9 figures (the code pages among them)
    # step peak, its backward phase, footprint of chained_dot at 1.9.0: grey rings until the
    # side-by-side run confirms them (tests/releases/test_confirm.py), red after
    assert value["marked"] == 0 and value["flagged"] == 3
    assert value["rows"] == 3
    assert value["releases"] == 3 and value["starred"] == ["1.7.0 *"]
    assert value["width"] > 300
    assert [r for r in seen["requests"] if not r.startswith("file://")] == []  # nothing fetched
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_a_stage_two_finding_names_its_commit_beside_the_change_it_bisected(published):
    finding = {"framework": "autograd", "workload": "chained_dot", "mode": "eager", "size": "small",
               "dtype": "float32", "device": "cpu", "metric": "total", "stage": "commits",
               "good": "v1.8.0", "bad": "v1.9.0", "releases": ["1.8.0", "1.9.0"], "kind": "culprit",
               "first_bad": "abcdef123456 keep contributions in a list", "last_good": "123456abcdef bump",
               "good_figure": 6 * MIB, "bad_figure": 14 * MIB, "change": 1.33, "probes": 9, "confirmed": True,
               "command": "python -m harness bisect --framework autograd ... --metric total"}
    other_series = dict(finding, workload="unet", first_bad="000000000000 not this one")
    other_pair = dict(finding, releases=["1.7.0", "1.8.0"], first_bad="111111111111 nor this one")
    (published / "autograd.commits.json").write_text(json.dumps([other_series, other_pair, finding]))
    assert cli.main(["releases", "--framework", "autograd", "--out", str(published), "--page-only"]) == 0
    document = json.loads((published / "autograd.changes.json").read_text())
    named = {c["figure"]: c.get("commit") for c in document["changes"] if not c["advisory"]}
    # only the change of the bisected series, metric (total = step_peak) and release pair
    assert named == {"step_peak": "abcdef123456 keep contributions in a list", "step_peak.backward": None,
                     "footprint": None}
    page = (published / "autograd.html").read_text()
    assert "first bad commit <b>abcdef123456 keep contributions in a list</b>" in page
    assert "6.00 MiB → 14.00 MiB" in page and "not this one" not in page and "nor this one" not in page


def test_the_rounds_per_release_agree_with_the_default_the_readme_gives(published):
    # a store swept with --repeats 2 says so beside the command's default (the README's 3)
    page = (published / "autograd.html").read_text()
    assert "--repeats" not in page  # no grid recorded: no claim about it
    (published / "autograd.sweep.json").write_text(json.dumps({"grid": {"repeats": 2, "size": "tiny"}}))
    assert cli.main(["releases", "--framework", "autograd", "--out", str(published), "--page-only"]) == 0
    page = (published / "autograd.html").read_text()
    assert (f"2 rounds per release (<code>harness releases --repeats 2</code>; the default is "
            f"{store.DEFAULT_ROUNDS})") in page
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert f"`--repeats` rounds each, {store.DEFAULT_ROUNDS} by default" in readme


def test_a_change_that_rounds_to_zero_has_no_sign():
    from harness.releases import page

    shown = page._side_by_side({"figure": "step_peak", "confirmation": {
        "status": "not confirmed", "before": 60 * MIB, "after": 60 * MIB - 20 * 1024, "relative": -0.0003,
        "pairs": 5, "p": 0.23, "before_samples": [60 * MIB], "after_samples": [60 * MIB - 20 * 1024]}})
    assert "(0.0%)" in shown and "-0.0%" not in shown


def test_an_actionable_line_gives_its_id_and_whether_it_reproduced_standalone(published):
    from harness.releases import page
    from harness.upstream import ids

    document = json.loads((published / "autograd.changes.json").read_text())
    change = next(c for c in document["changes"] if c["figure"] == "step_peak")
    change["actionable"] = True
    change["confirmation"] = {"status": "confirmed", "before": 6 * MIB, "after": 14 * MIB, "delta": 8 * MIB,
                              "relative": 1.33, "p": 0.00397, "pairs": 5}
    records = [json.loads(line) for line in (published / "autograd.jsonl").read_text().splitlines()]
    change_id = ids.of("autograd", change)
    assert change_id == "autograd:chained_dot:eager:step_peak:1.8.0->1.9.0"
    plain = page.render("autograd", records, document, {}, {})
    shown = change_id.replace(">", "&gt;")  # escaped in the page
    assert f"<code>{shown}</code>" in plain and "harness only" not in plain and "reproduced standalone" not in plain
    found = page.render("autograd", records, document, {}, {},
                        upstream={"changes": {change_id: {"status": "harness only"}}})
    assert ' · <b class="standalone">harness only</b>' in found
    assert "1 of the 1 actionable figures run, 0 reproduced standalone, 1 harness only." in found
    # the script with each op a small function reproduces it: the loss's form, on the line and in the count
    by_form = page.render("autograd", records, document, {}, {}, upstream={"changes": {change_id: {
        "status": "harness only", "forms": {"functions": {"status": "reproduced"}}}}})
    assert '<b class="standalone">harness only: the loss&#x27;s form (reproduced with each op a small function)</b>' in by_form
    assert "1 harness only (1 of them the loss's form: reproduced with the loss written as gradmem runs it" in by_form
