"""The comparison page in headless Chromium: it renders, shows the grid, and the
console stays clean. Needs Debian's `chromium` (tools/ensure_chromium.sh installs it)."""

import pytest

from harness.report.page import write_page

import chromium_cdp

pytestmark = [
    pytest.mark.slow,  # acceptance: headless Chromium
    pytest.mark.skipif(
        chromium_cdp.find_chromium() is None,
        reason="no chromium on PATH; run tools/ensure_chromium.sh (apt-get install chromium)",
    ),
]

GRID_PROBE = """({
  grids: document.querySelectorAll('table.grid').length,
  cells: document.querySelectorAll('table.grid td.cell').length,
  failed: [...document.querySelectorAll('table.grid td.cell .status')].map(e => e.textContent),
  charts: document.querySelectorAll('.charts svg').length,
  gridWidth: document.querySelector('table.grid').getBoundingClientRect().width,
  title: document.title,
})"""


def test_page_renders_the_grid_with_a_clean_console(records_file, tmp_path):
    page = write_page([str(records_file)], str(tmp_path / "site"))
    seen = chromium_cdp.inspect_page(f"file://{page}", GRID_PROBE, screenshot=str(tmp_path / "page.png"))
    assert seen["problems"] == []
    value = seen["value"]
    assert value["title"] == "gradmem comparison"
    assert value["grids"] == 2  # the eager and the compiled view
    assert value["cells"] == 10 + 1  # 2 workloads x 5 columns, 1 x 1
    assert sorted(value["failed"]) == ["error", "oom", "unavailable"]
    assert value["charts"] == 2 * 2 + 2  # memory + time per workload and view
    assert value["gridWidth"] > 300  # laid out, not collapsed
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_the_probe_does_see_console_errors(tmp_path):
    # The clean-console assertion above means something only if errors are caught.
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><title>x</title><img src='missing.png'>"
                   "<script>console.error('planted'); undefinedFunction();</script>")
    problems = chromium_cdp.inspect_page(f"file://{bad}", "1")["problems"]
    assert any("planted" in p for p in problems)
    assert any("undefinedFunction" in p for p in problems)
    assert any("missing.png" in p for p in problems)
