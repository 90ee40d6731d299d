"""The page's memory figures: the grid shows the step peak with retained beside it, a
stacked bar of the footprint, and says what each figure means (fixture records)."""

import json
import re

import pytest

from harness.report import grid, split
from harness.report.page import write_page

from report_fixtures import MIB, fixture_record


def render(tmp_path, recs):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return open(write_page([str(path)], str(tmp_path / "site")), encoding="utf-8").read()


def test_the_grid_leads_with_the_step_peak_and_shows_retained_beside_it(tmp_path):
    big = fixture_record("chained_dot", "jax", retained_bytes=200 * MIB,
                         peak_bytes={"forward": 3 * MIB, "backward": 5 * MIB, "total": 5 * MIB})
    page = render(tmp_path, [fixture_record(), big])
    (_, reference_class), (jax_cell, jax_class) = [
        (body, cls) for cls, body in re.findall(r'<td class="cell status-ok( lowest)?"[^>]*>(.*?)</td>', page)]
    assert '<div class="peak">5 MiB<span class="retained"> + 200 MiB retained</span>' in jax_cell
    # The lowest-of-row mark and the ratio use the step peak (5 MiB against the
    # reference's 6 MiB; 5 MiB / 4 MiB bound), not the footprint (205 MiB against 8)
    assert "1.25× bound" in jax_cell and jax_class == " lowest" and reference_class == ""
    assert grid.MEANING in page and "<b>step peak</b>" in page and "<b>footprint</b>" in page


def test_the_bar_splits_the_footprint_on_one_scale_per_row_and_names_what_is_not_seen(tmp_path):
    seen = fixture_record()
    unseen = fixture_record("chained_dot", "tensorflow")
    unseen["breakdown_bytes"]["saved_activations"] = None
    unseen["breakdown_bytes"]["temporaries"] = None
    # retained 2 + saved 4 + gradients 1 + temporaries 1 MiB = 8 MiB: the row's scale
    assert split.scale_bytes([seen, unseen]) == 8 * MIB
    bar = split.render(seen, 8 * MIB)
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="0.0" width="([\d.]+)"', bar)]
    # widths are written rounded to 0.1 px
    assert widths == pytest.approx([split.WIDTH * f for f in (2 / 8, 4 / 8, 1 / 8, 1 / 8)], abs=0.051)
    assert "not seen" not in bar
    assert "not seen: saved activations, temporaries" in split.render(unseen, 8 * MIB)
