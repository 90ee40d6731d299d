"""`harness site` on this repository: the front page shows the committed records'
headline with their provenance and links every part; each part is written."""

import json
import os
import pathlib
import re
import sys

import pytest

from harness import cli, workloads
from harness.releases import confirm
from harness.site import command, comparisons, front, releases

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_front_page_links_every_part(site):
    front = (site / "index.html").read_text()
    hrefs = set(re.findall(r'href="([^"]+)"', front))
    framework_pages = sorted(p.name for p in (ROOT / "releases").glob("*.html"))
    assert framework_pages  # the repository holds release pages
    for name in framework_pages:
        assert f"releases/{name}" in hrefs
        copy = (site / "releases" / name).read_text()
        home = re.search(r'<p style="[^"]*"><a href="\.\./index\.html">← gradmem observatory</a></p>', copy).group(0)
        assert copy.replace(home, "", 1) == (ROOT / "releases" / name).read_text()  # as written, and a way back
    assert {"releases/index.html", "seeds.html", "gpu.html"} <= hrefs
    assert 'id="history"' in front and "Not built (--history skip)" in front
    for record_set in comparisons.find(str(ROOT)):
        assert f"{record_set.folder}/index.html" in hrefs
        assert (site / record_set.folder / "index.html").exists()
    assert "<script" not in front  # a static page


def test_the_headline_reads_the_committed_cuda_records_through_the_registry(site):
    front = (site / "index.html").read_text()
    paper = front[front.index('id="cuda-paper"'):]
    # torch chained_dot paper on the H200: the allocator's 407.6 MiB, 1.08x its bound
    # (tests/report/test_cuda_figures.py reads the same record through the registry)
    torch_cell = re.search(r"<th>chained_dot</th>(.*?)</tr>", paper).group(1)
    assert "407.6 MiB" in torch_cell and "1.08× bound" in torch_cell
    # JAX's allocator cannot reset its peak: the first run's paper cell is an upper bound,
    # never marked the lowest; at small the newer run measured its step alone (exact), and the
    # newest measurement of a cell is the one shown
    upper = re.findall(r'<td class="([^"]*)"[^>]*>≤ [^<]*<br><span class="meta">upper bound', paper)
    assert upper and all("lowest" not in cls for cls in upper)
    small = front[front.index('id="cuda-small"'):front.index('id="cuda-paper"')]
    jax_row = re.search(r"<th>chained_dot</th>(.*?)</tr>", small).group(1)
    assert "116 MiB" in jax_row or "115.8 MiB" in jax_row
    assert "NVIDIA H200" in small and "torch 2.11.0" in small  # where and with what
    assert "2026-11-26" in small


def test_each_set_has_its_provenance_and_refresh_command():
    for record_set in comparisons.find(str(ROOT)):
        found = comparisons.summary(record_set)
        assert found["when"] and found["machine"] and found["versions"], record_set.name
        assert all(f.startswith(("results/cpu/", "results/gpu/")) for f in record_set.files)
        assert {r.get("device") or "cpu" for r in record_set.records} == {record_set.device}
        assert {r["size"] for r in record_set.records} == {record_set.size}


def test_a_set_that_is_not_committed_is_named_with_its_command(tmp_path):
    root = tmp_path / "repo"
    (root / "results" / "gpu" / "run").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "releases").mkdir()
    one = next(line for line in (ROOT / "results/gpu/2026-11-26-h200/cuda-paper.jsonl").read_text().splitlines()
               if '"status":"ok"' in line)
    (root / "results/gpu/run/cuda.jsonl").write_text(one + "\n")
    (root / "docs" / "seeds.md").write_text("# Seeds\n\ntext\n")
    (root / "docs" / "gpu.md").write_text("# GPU\n")
    path = command.build_site(str(tmp_path / "site"), str(root), with_history=False)
    front = open(path).read()
    assert "No committed CPU small records" in front
    assert "python -m harness run --size small --out results/cpu/small.jsonl" in front
    assert "No committed CPU paper records" in front
    assert "0 changes between consecutive releases held" in front and "The sweeps flagged 0" in front
    # the one record's workload is drawn; the run's missing workloads are named, not hidden
    workload = json.loads(one)["workload"]
    note = re.search(r"no record of ([^(<]*) \(the run did not reach them\)", front).group(1)
    assert workload not in note and len(note.split(", ")) == len(workloads.NAMES) - 1


def test_the_command_line_writes_the_site_and_refuses_a_bad_choice(tmp_path, capsys):
    assert cli.main(["site", "--out", str(tmp_path / "s"), "--history", "skip"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "s" / "index.html")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["site", "--out", str(tmp_path / "s"), "--history", "maybe"])
    assert exit_info.value.code == 2
    assert "choose from 'build', 'skip'" in capsys.readouterr().err
    assert cli.main(["site", "--out", str(tmp_path / "t"), "--root", str(tmp_path)]) == 2
    assert "is not a gradmem repository" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_the_overview_lists_every_change_newest_first(site):
    per_framework = releases.load(str(ROOT / "releases"))
    total = sum(len(json.loads(p.read_text())["changes"]) for p in (ROOT / "releases").glob("*.changes.json"))
    ordered = releases.newest_first(per_framework)
    assert len(ordered) == total > 0
    dates = [c["uploaded"] for c in ordered]
    assert dates == sorted(dates, reverse=True)
    page = (site / "releases" / "index.html").read_text()
    tables = page.count("<thead>")
    assert page.count("<tr>") == total + tables  # one row per change and each table's heading
    # the confirmed changes lead, open; every other group is folded
    groups = confirm.by_status(ordered)
    first_fold = page.index("<details")
    for status in ("actionable", "confirmed"):
        for c in groups[status][:3]:
            assert page.index(f"{c['before_release']} → <strong>{c['release']}</strong>") < first_fold
    # each folded group is there with its count only when it has changes: the stores hold no
    # pending change since every flagged one was measured side by side, and an empty fold says nothing
    folded = ("pending", "not confirmed", "failed", "advisory")
    for status in folded:
        fold = f'<details id="{status.replace(" ", "-")}"><summary>'
        if groups[status]:
            assert re.search(re.escape(fold) + rf"[^<]* \({len(groups[status])}\)</summary>", page), status
        else:
            assert fold not in page, status
    assert tables == 2 + sum(1 for s in folded if groups[s])
    # stage 2's commit of tinygrad chained_dot's retained 0.13.0 -> 0.14.0, confirmed
    assert "d1f215d37784 cpu: uop worker (#17133)" in page
    row = next(r for r in page.split("<tr>") if "d1f215d37784" in r)
    assert "0.13.0 → <strong>0.14.0</strong>" in row and "first bad commit, confirmed" in row
    # why it moved: `harness diff` of the two releases' median rounds
    href = re.search(r'<a href="(diff/[^"]+)">diff</a>', row).group(1)
    diff = (site / "releases" / href).read_text()
    assert "tinygrad 0.13.0" in diff and "tinygrad 0.14.0" in diff and "retained" in diff


def test_the_overview_attaches_commits_files_and_shows_a_confirmation(tmp_path):
    releases_dir = tmp_path / "releases"
    releases_dir.mkdir()
    document = json.loads((ROOT / "releases" / "pytensor.changes.json").read_text())
    change = next(c for c in document["changes"] if c["workload"] == "transformer_block"
                  and c["figure"] == "retained" and c["release"] == "3.0.1")
    change.pop("commit_search", None)
    change.pop("commit", None)
    # as `harness releases --confirm` records it
    change["confirmation"] = {"status": "confirmed", "relative": -0.4295, "p": 0.00397, "pairs": 5,
                              "before_samples": [1.0], "gradmem": ["b1a5013592b4"]}
    other = dict(change, figure="step_peak", release="3.0.2", before_release="3.0.1")
    other.pop("confirmation")
    other["actionable"] = False  # as the detector writes a change not yet measured side by side
    document["changes"] = [change, other]
    (releases_dir / "pytensor.changes.json").write_text(json.dumps(document))
    for suffix in ("sweep.json", "commits.json"):
        (releases_dir / f"pytensor.{suffix}").write_bytes((ROOT / "releases" / f"pytensor.{suffix}").read_bytes())
    listed = releases.write(str(releases_dir), str(tmp_path / "site"))
    [(name, tally, href)] = listed
    assert (name, href) == ("pytensor", "releases/index.html")  # no pytensor.html here: no link to one
    # the retained move is confirmed and at least 5 % and 1 MiB: one to act on; the other awaits its run
    assert (tally["flagged"], tally["confirmed"], tally["pending"]) == (2, 1, 1)
    page = (tmp_path / "site" / "releases" / "index.html").read_text()
    confirmed, pending = page.split("<details")
    assert "d74c6c20e5ea" in confirmed  # from pytensor.commits.json
    assert "<strong>confirmed</strong>" in confirmed and "-43.0% side by side; p 0.00397; 5 pairs" in confirmed
    assert "3.0.2" in pending and "d74c6c20e5ea" not in pending  # not listed as a change: folded
    assert "pytensor.html" not in page


@pytest.mark.slow  # asv publish over the committed results (~10 s)
def test_the_history_is_built_with_local_scripts(tmp_path):
    assets = ROOT / ".venv" / "asv-www"
    if not (assets / ".manifest-sha256").exists():
        pytest.skip("the history site's scripts are not vendored (make setup: tools/asv_site.py vendor)")
    pytest.importorskip("asv")
    from harness.site import links

    path = command.build_site(str(tmp_path / "site"), str(ROOT), with_history=True, asv_assets=str(assets))
    front = open(path).read()
    assert 'href="history/index.html"' in front
    assert f"python -m http.server -d {tmp_path / 'site'}" in front  # how to open it, where it is linked
    assert os.path.exists(tmp_path / "site" / "history" / "index.json")
    assert links.remote_resources(str(tmp_path / "site")) == []
    assert links.broken_links(str(tmp_path / "site")) == []
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    import chromium_cdp

    if chromium_cdp.find_chromium() is None:
        return  # the page itself is checked above and in tests/asv/test_site.py
    # opened from disk, the history says how to open it instead of asv's "internet connection"
    seen = chromium_cdp.inspect_page(f"file://{tmp_path}/site/history/index.html",
                                     "new Promise(r => setTimeout(() => r([location.href, document.body.innerText]), 1500))",
                                     await_promise=True, flags=chromium_cdp.OFFLINE)
    where, text = seen["value"]
    assert where.endswith("/history/error.html"), where
    assert f"python -m http.server -d {tmp_path / 'site'}" in text and "internet connection" not in text


def test_the_front_page_says_how_to_open_the_history_where_it_links_it():
    page = front.render([], [], [], ("history/index.html", "every figure per commit."),
                        command.history.serve_note("out/site"))
    link = page[page.index('href="history/index.html"'):]
    note = link[:link.index("</p>", link.index("</p>") + 4)]  # the link's paragraph and the one after it
    assert "python -m http.server -d out/site" in note and "http://localhost:8000/history/" in note
    assert "SITE_DIR" not in page


def test_the_pages_workflow_runs_make_site_and_uploads_what_it_writes():
    # The workflow cannot run here (GitHub's runners, Pages); what it calls is tested above.
    import re

    text = (ROOT / ".github" / "workflows" / "site.yml").read_text()
    assert re.findall(r"^\s*(?:- )?run: (.+)$", text, re.M) == ["make site OUT=out"]
    upload = text[text.index("actions/upload-pages-artifact"):]
    assert re.search(r"path: out/site\b", upload)
    assert "actions/deploy-pages" in text and "pages: write" in text
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^site: (.*)\n((?:\t.*\n)+)", makefile, re.M)
    assert "$(STAMP)" in target.group(1)  # it sets up like `make run`
    assert "-m harness site --out $(OUT)/site" in target.group(2)
    assert "-m harness.site.links $(OUT)/site" in target.group(2)


def test_a_cell_measured_twice_is_counted_once_with_its_newest_status():
    cell = {"workload": "chained_dot", "framework": "torch", "mode": "eager", "size": "small",
            "dtype": "float32", "device": "cuda"}
    older = dict(cell, status="error", provenance={"started_at": "2026-11-26T08:00:00Z"})
    newer = dict(cell, status="ok", provenance={"started_at": "2026-11-26T09:00:00Z"})
    other = dict(cell, workload="unet", status="ok", provenance={"started_at": "2026-11-26T08:30:00Z"})
    record_set = comparisons.RecordSet("cuda", "small", sorted([older, newer, other],
                                                               key=lambda r: r["provenance"]["started_at"]))
    found = comparisons.summary(record_set)
    assert found["cells"] == {"ok": 2} and found["superseded"] == 1
