"""What the site's pages say agrees from page to page and speaks of the project: the
same cell count for a set on the front page and on its comparison page, no "-0.0%",
and the seed reports explain a figure by what gradmem measured, not by how the page
was written."""

import json
import pathlib
import re

from harness.releases import store
from harness.site import comparisons
from harness.units import MIB

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: words about how a page was made (a session, a machine lent to it, who decides next)
#: rather than about the project
MAKING_OF = ("lent to this session", "no GPU lent", "this session", "left for the lead")


def test_a_set_has_the_same_cell_count_on_the_front_page_and_its_comparison_page(site):
    front = (site / "index.html").read_text()
    for record_set in comparisons.find(str(ROOT)):
        cells = comparisons.summary(record_set)["cells"]
        part = front[front.index(f'id="{record_set.name}"'):]
        listed = re.search(r"<th>cells</th><td>([^<]*)</td>", part).group(1)
        assert sum(int(n) for n in re.findall(r"(\d+) [a-z]+", listed.split("(")[0])) == sum(cells.values())
        page = (site / record_set.folder / "index.html").read_text()
        assert re.search(r"<p>(\d+) cells from", page).group(1) == str(sum(cells.values())), record_set.name


def test_no_page_shows_a_negative_zero(site):
    # the release pages (releases/NAME.html, as `harness releases` wrote them) included
    for path in site.rglob("*.html"):
        assert not re.search(r"-0\.0+ ?%", path.read_text()), path


def test_each_release_page_s_rounds_agree_with_the_readme(site):
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"`--repeats` rounds each, {store.DEFAULT_ROUNDS} by default" in readme
    for meta in (ROOT / "releases").glob("*.sweep.json"):
        name = meta.name[:-len(".sweep.json")]
        repeats = json.loads(meta.read_text())["grid"]["repeats"]
        page = (site / "releases" / f"{name}.html").read_text()
        said = f"{repeats} rounds per release"
        if repeats != store.DEFAULT_ROUNDS:
            said += f" (<code>harness releases --repeats {repeats}</code>; the default is {store.DEFAULT_ROUNDS})"
        assert said in page, name


def test_the_seed_reports_speak_of_what_the_project_measured(site):
    text = " ".join((ROOT / "docs" / "seeds.md").read_text().split())
    page = " ".join((site / "seeds.html").read_text().split())
    for words in MAKING_OF:
        assert words not in text and words not in page, words
    # the candle thread's torch on CUDA: the H200 record's figures, quoted as measured
    run = ROOT / "results" / "gpu" / "2026-11-26-h200" / "cuda-paper.jsonl"
    (record,) = [r for r in map(json.loads, run.read_text().splitlines())
                 if (r["workload"], r["framework"], r["mode"], r["status"]) == ("tiny_nerf", "torch", "eager", "ok")]
    peaks = record["device_memory"]["peak_bytes"]
    quoted = f"{peaks['forward'] / MIB:.2f} MiB at forward → {peaks['backward'] / MIB:.2f} MiB after backward"
    assert quoted in text
    assert f"+{peaks['backward'] / peaks['forward'] - 1:.1%}".replace("%", " %") in text
