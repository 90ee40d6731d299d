"""The site's pages of changes made ready to file upstream: one per draft, its script beside it.

From a small releases folder (a store's changes, its standalone outcomes, one draft and
its script): the index counts the actionable figures run and reproduced, lists the draft
with its verdict, and the draft's page links to the script copied beside it; every link
of the pages resolves and nothing loads from elsewhere."""

import json

from harness.site import links, upstream

DRAFT = """# torch 2.4.0: retained of a torch.compile training step rises by 5.73 MiB (+37.5%) from 2.3.1 (rnn_fanout, CPU)

`torch:rnn_fanout:compiled:retained:2.3.1->2.4.0` · **reproduced standalone**

## Reproduce

The standalone script: [torch-rnn_fanout-compiled-2.3.1-to-2.4.0.py](torch-rnn_fanout-compiled-2.3.1-to-2.4.0.py).
A file the site does not hold: [releases.md](../docs/releases.md).
Each op a small function: [torch-rnn_fanout-compiled-2.3.1-to-2.4.0.functions.py](torch-rnn_fanout-compiled-2.3.1-to-2.4.0.functions.py).
A script of another draft: [torch-unet-compiled-2.3.1-to-2.4.0.py](torch-unet-compiled-2.3.1-to-2.4.0.py).
"""


def _releases(tmp_path):
    folder = tmp_path / "releases"
    (folder / "upstream" / "torch").mkdir(parents=True)
    change = {"workload": "rnn_fanout", "mode": "compiled", "figure": "retained", "before_release": "2.3.1",
              "release": "2.4.0", "actionable": True}
    other = dict(change, figure="footprint")
    (folder / "torch.changes.json").write_text(json.dumps({"framework": "torch", "changes": [change, other]}))
    name = "torch-rnn_fanout-compiled-2.3.1-to-2.4.0"
    (folder / "torch.upstream.json").write_text(json.dumps({"changes": {
        "torch:rnn_fanout:compiled:retained:2.3.1->2.4.0": {"status": "reproduced", "actionable": True,
                                                            "draft": f"upstream/torch/{name}.md"}}}))
    (folder / "upstream" / "torch" / f"{name}.md").write_text(DRAFT)
    (folder / "upstream" / "torch" / f"{name}.py").write_text("print('standalone')\n")
    (folder / "upstream" / "torch" / f"{name}.functions.py").write_text("print('each op a function')\n")
    return folder, name


def test_each_draft_is_a_page_beside_its_script_and_the_index_counts_them(tmp_path):
    folder, name = _releases(tmp_path)
    site = tmp_path / "site"
    tallies = upstream.write(str(folder), str(site))
    assert tallies["torch"]["actionable"] == 2 and tallies["torch"]["run"] == 1
    assert tallies["torch"]["reproduced"] == 1
    index = (site / "releases" / "upstream" / "index.html").read_text()
    assert "<td class='num'>2</td><td class='num'>1</td><td class='num'>1</td>" in index
    assert f'href="torch/{name}.html"' in index and "reproduced standalone" in index
    page = (site / "releases" / "upstream" / "torch" / f"{name}.html").read_text()
    assert f'<a href="{name}.py">{name}.py</a>' in page
    assert (site / "releases" / "upstream" / "torch" / f"{name}.py").read_text() == "print('standalone')\n"
    # the same step with each op a small function, where it was run, is copied and linked too
    assert f'<a href="{name}.functions.py">' in page
    assert (site / "releases" / "upstream" / "torch" / f"{name}.functions.py").exists()
    assert 'href="torch-unet-compiled-2.3.1-to-2.4.0.py"' not in page  # not held here: text, no link
    assert "releases.md" in page and 'href="../docs/releases.md"' not in page  # not held: text, no link
    # the navigation bar's targets, as a whole site has them
    (site / "index.html").write_text('<p id="comparisons">front</p><p id="history"></p>')
    for other in ("seeds.html", "gpu.html"):
        (site / other).write_text("<p></p>")
    (site / "releases" / "index.html").write_text('<a href="upstream/index.html">upstream</a>')
    assert links.broken_links(str(site)) == [] and links.remote_resources(str(site)) == []


def test_with_no_draft_the_index_says_so(tmp_path):
    (tmp_path / "releases").mkdir()
    assert upstream.write(str(tmp_path / "releases"), str(tmp_path / "site")) == {}
    assert "No draft written yet." in (tmp_path / "site" / "releases" / "upstream" / "index.html").read_text()
