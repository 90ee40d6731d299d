"""Every page of the observatory opened from disk in headless Chromium with no network
(no host name resolves): it renders, its console stays clean, and it asks for nothing
but files of the site. Needs Debian's `chromium` (tools/ensure_chromium.sh installs it)."""

import os
import sys

import pytest

from harness.site import links

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
import chromium_cdp  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # acceptance: headless Chromium
    pytest.mark.skipif(
        chromium_cdp.find_chromium() is None,
        reason="no chromium on PATH; run tools/ensure_chromium.sh (apt-get install chromium)",
    ),
]

PROBE = """({
  title: document.title,
  text: document.body.innerText.length,
  width: document.body.scrollWidth,
  brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length,
})"""


def test_every_page_renders_from_disk_without_a_remote_request(site, tmp_path):
    pages = [p for p in links.pages(str(site)) if not p.startswith(str(site / "history"))]
    assert len(pages) >= 8
    for path in pages:
        shot = str(tmp_path / "front.png") if path == str(site / "index.html") else None
        seen = chromium_cdp.inspect_page(f"file://{path}", PROBE, screenshot=shot, flags=chromium_cdp.OFFLINE)
        name = os.path.relpath(path, site)
        assert seen["problems"] == [], name
        outside = [url for url in seen["requests"] if not url.startswith(f"file://{site}/")]
        assert outside == [], name
        assert seen["value"]["title"] and seen["value"]["text"] > 200, name  # rendered, not blank
        assert seen["value"]["brokenImages"] == 0, name
    assert (tmp_path / "front.png").stat().st_size > 20_000  # the front page drew something


def test_the_probe_sees_a_remote_request(tmp_path):
    # "no remote request" above means something only if one is caught when made
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><title>x</title><p>text</p><img src="https://example.org/a.png">')
    seen = chromium_cdp.inspect_page(f"file://{page}", "1", flags=chromium_cdp.OFFLINE)
    assert "https://example.org/a.png" in seen["requests"]
    assert seen["problems"]  # the failed load is logged
