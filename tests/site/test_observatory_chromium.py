"""Every kind of page of the observatory (every page but a sample of the release diff
pages) opened from disk in headless Chromium with no network (no host name resolves): it renders, its console stays clean, and it asks for nothing
but files of the site. Needs Debian's `chromium` (tools/ensure_chromium.sh installs it)."""

import base64
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


def open_each(paths, probe, screenshot_of=None, screenshot=None):
    """Open each page in one offline browser (a fresh launch per page would take minutes
    for the site's hundreds of diff pages); {path: {"value", "problems", "requests"}}."""
    browser = chromium_cdp.Browser(chromium_cdp.find_chromium(), flags=chromium_cdp.OFFLINE)
    seen = {}
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.send(f"{domain}.enable", session=session)
        for path in paths:
            browser.events.clear()
            browser.send("Page.navigate", {"url": f"file://{path}"}, session=session)
            browser.wait_for("Page.loadEventFired", session)
            result = browser.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session)
            if path == screenshot_of:
                shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                    session=session)
                with open(screenshot, "wb") as out:
                    out.write(base64.b64decode(shot["data"]))
            # late console messages (image decode errors) arrive before judging
            browser.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 50))",
                                              "awaitPromise": True}, session=session)
            seen[path] = {"value": result.get("result", {}).get("value"),
                          "problems": chromium_cdp.problems(browser.events),
                          "requests": chromium_cdp.requests(browser.events)}
    finally:
        browser.close()
    return seen


#: of the release diff pages (one template, hundreds of pages: ~0.14 s each in Chromium,
#: two minutes of the suite for all), each framework's first and every DIFF_STRIDE-th
#: render here; every one of them is parsed for remote loads and dead links by
#: test_observatory_links.py
DIFF_STRIDE = 10


def rendered(pages, site):
    diff = str(site / "releases" / "diff") + os.sep
    kept, seen = [], {}
    for path in pages:
        if path.startswith(diff):
            framework = os.path.basename(path).split("-")[0]
            seen[framework] = seen.get(framework, -1) + 1
            if seen[framework] % DIFF_STRIDE:
                continue
        kept.append(path)
    return kept


def test_the_pages_render_from_disk_without_a_remote_request(site, tmp_path):
    pages = rendered([p for p in links.pages(str(site)) if not p.startswith(str(site / "history"))], site)
    assert len(pages) >= 8
    front = str(site / "index.html")
    seen = open_each(pages, PROBE, screenshot_of=front, screenshot=str(tmp_path / "front.png"))
    assert len(seen) == len(pages)
    for path, found in seen.items():
        name = os.path.relpath(path, site)
        assert found["problems"] == [], name
        outside = [url for url in found["requests"] if not url.startswith(f"file://{site}/")]
        assert outside == [], name
        assert found["value"]["title"] and found["value"]["text"] > 200, name  # rendered, not blank
        assert found["value"]["brokenImages"] == 0, name
    assert (tmp_path / "front.png").stat().st_size > 20_000  # the front page drew something


def test_the_probe_sees_a_remote_request(tmp_path):
    # "no remote request" above means something only if one is caught when made
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><title>x</title><p>text</p><img src="https://example.org/a.png">')
    clean = tmp_path / "clean.html"
    clean.write_text("<!DOCTYPE html><title>y</title><p>text</p>")
    seen = open_each([str(page), str(clean)], "1")
    assert "https://example.org/a.png" in seen[str(page)]["requests"]
    assert seen[str(page)]["problems"]  # the failed load is logged
    assert seen[str(clean)]["problems"] == [] and seen[str(clean)]["requests"] == [f"file://{clean}"]
