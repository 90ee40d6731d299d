"""The history site as a reader gets it: the committed results published with
tools/asv_site.py, served from 127.0.0.1 and opened in a Chromium that can resolve no
host name (offline). asv's own page loads seven scripts and a stylesheet from CDNs and
shows only an error without them; here it must load everything from the site itself,
draw the peak-memory graph's points, keep the console clean, and link to the comparison
page and back.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import asv_helpers as h

sys.path.insert(0, str(h.PROJECT / "tests" / "report"))
from report_fixtures import fixture_records, write_jsonl  # noqa: E402

RESULTS = h.PROJECT / "results"
GRAPH = "bench_memory.PeakMemory.track_backward"

# Waits until the graph's data stop changing and no request is in flight, then reads
# flot's series and checks the canvas: a point counts as drawn when a pixel of its
# series' colour lies within 5 CSS px of where flot puts it.
PROBE = """(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const started = Date.now();
  let last = null, stableSince = Date.now(), plot = null;
  while (Date.now() - started < 30000) {
    plot = window.jQuery && jQuery('#main-graph').data('plot');
    const shape = plot ? JSON.stringify(plot.getData().map(s => s.data.length)) : null;
    if (shape !== last) { last = shape; stableSince = Date.now(); }
    if (plot && plot.getData().length && jQuery.active === 0 && Date.now() - stableSince > 700) break;
    await sleep(100);
  }
  if (!plot) return {error: 'no graph', location: location.href, text: document.body.innerText.slice(0, 300)};
  const canvas = plot.getCanvas(), ratio = canvas.width / canvas.clientWidth, off = plot.getPlotOffset();
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;  // one readback
  const rgb = color => color.startsWith('#')
    ? [1, 3, 5].map(i => parseInt(color.slice(i, i + 2), 16)) : color.match(/\\d+/g).slice(0, 3).map(Number);
  const series = plot.getData().map(s => {
    const want = rgb(s.color);
    const points = s.data.filter(p => p[1] !== null && p[1] !== undefined);
    const drawn = points.filter(p => {
      const x = (off.left + s.xaxis.p2c(p[0])) * ratio, y = (off.top + s.yaxis.p2c(p[1])) * ratio;
      const r = Math.ceil(5 * ratio);
      for (let py = Math.max(0, Math.round(y - r)); py <= Math.min(canvas.height - 1, y + r); py++) {
        for (let px = Math.max(0, Math.round(x - r)); px <= Math.min(canvas.width - 1, x + r); px++) {
          const i = 4 * (py * canvas.width + px);
          const miss = Math.abs(pixels[i] - want[0]) + Math.abs(pixels[i + 1] - want[1]) + Math.abs(pixels[i + 2] - want[2]);
          if (pixels[i + 3] > 0 && miss < 60) return true;
        }
      }
      return false;
    }).length;
    return {label: s.label, points: points.length, drawn};
  });
  const link = document.querySelector('#nav-li-comparison a');
  const comparison = link ? await (await fetch(link.getAttribute('href'))).text() : '';
  const back = new DOMParser().parseFromString(comparison, 'text/html').querySelector('a.history');
  return {series, title: document.title, comparison: link && link.getAttribute('href'),
          back: back && back.getAttribute('href')};
})()"""


# The committed history (docs/asv.md): >= 10 commits of main at `small` on this machine,
# all at the suite's benchmark version, so its series must draw >= 10 points.
HISTORY_MACHINE, HISTORY_COMMITS = "linux-x86_64-2cpu-nogpu-small", 10


def committed_machines():
    return sorted(p.parent.name for p in RESULTS.glob("*/machine.json"))


def machines_at_current_version():
    """Machines with a result of GRAPH at the suite's version (asv draws only those)."""
    version = json.loads((RESULTS / "benchmarks.json").read_text())[GRAPH]["version"]
    found = set()
    for path in h.committed_result_files(RESULTS):
        data = json.loads(path.read_text())
        row = data["results"].get(GRAPH)
        if row and row[data["result_columns"].index("version")] == version:
            found.add(path.parent.name)
    return sorted(found)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    config = h.write_config(tmp, h.PROJECT, results_dir=str(RESULTS))
    records = write_jsonl(tmp / "records.jsonl", fixture_records())
    done = subprocess.run([h.PYTHON, str(h.PROJECT / "tools" / "asv_site.py"), "publish", "--config", str(config),
                           "--comparison", str(records)], capture_output=True, text=True, cwd=tmp)
    return {"html": tmp / "html", "publish": done, "tmp": tmp}


@pytest.mark.slow  # acceptance: asv publish, Chromium
def test_publish_of_the_committed_results_skips_nothing(site):
    done = site["publish"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Skipping results" not in done.stdout + done.stderr
    index = json.loads((site["html"] / "index.json").read_text())
    assert committed_machines() and set(committed_machines()) <= set(index["machines"])


def test_committed_results_are_named_by_versions_not_paths():
    files = h.committed_result_files(RESULTS)
    assert files
    for path in files:
        data = json.loads(path.read_text())
        assert re.fullmatch(r"py\d+\.\d+(-[A-Za-z0-9_.+-]+)?", data["env_name"]), path.name
        assert re.fullmatch(r"\d+\.\d+", data["python"]) and data["params"]["python"] == data["python"], path.name
        assert data["requirements"], path.name  # the framework versions are keys
        assert all(data["params"][k] == v for k, v in data["requirements"].items()), path.name
        assert path.name == h.result_file_name(data["commit_hash"], data["env_name"])


@pytest.mark.slow  # acceptance: asv publish, Chromium
def test_site_loads_nothing_from_outside(site):
    page = (site["html"] / "index.html").read_text()
    loads = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', page)
    assert loads and not [url for url in loads if re.match(r"(https?:)?//", url)]
    for url in loads:
        assert (site["html"] / url).is_file(), url


def test_publish_refuses_what_it_cannot_make_local(tmp_path):
    import asv

    sys.path.insert(0, str(h.PROJECT / "tools"))
    import asv_site

    copy = tmp_path / "html"
    copy.mkdir()
    original = Path(asv.__file__).parent / "www" / "index.html"  # asv's page, with the CDN URLs
    (copy / "index.html").write_text(original.read_text().replace(
        "</head>", '<script src="https://cdn.example.org/new.js"></script></head>'))
    with pytest.raises(asv_site.SiteError, match="cdn.example.org/new.js"):
        asv_site.localize(str(copy))
    with pytest.raises(asv_site.SiteError, match="tools/asv_site.py vendor"):
        asv_site.localize(str(copy), assets=str(tmp_path / "nothing"))


def test_opened_from_disk_the_page_says_how_to_serve_it(tmp_path):
    # From disk asv's page cannot load its data and showed "Make sure you have an active
    # internet connection": it now goes at once to a page that says why and what to run.
    import asv

    sys.path.insert(0, str(h.PROJECT / "tools"))
    import asv_site

    html_dir = tmp_path / "site" / "history"
    html_dir.mkdir(parents=True)
    www = Path(asv.__file__).parent / "www"
    for name in ("index.html", "error.html"):
        (html_dir / name).write_text((www / name).read_text())
    asv_site.explain_from_disk(str(html_dir), serve_root=str(tmp_path / "site"))
    asv_site.explain_from_disk(str(html_dir), serve_root=str(tmp_path / "site"))  # once, however often
    page = (html_dir / "index.html").read_text()
    head = page[page.index("<head>") + len("<head>"):]
    assert head.lstrip().startswith(asv_site.FROM_DISK) and page.count(asv_site.FROM_DISK) == 1
    error = (html_dir / "error.html").read_text()
    assert "active internet connection" not in error
    assert f"python -m http.server -d {tmp_path / 'site'}" in error
    assert "http://localhost:8000/history/" in error and "file://" in error


@pytest.mark.slow  # acceptance: asv publish, Chromium
def test_offline_chromium_draws_the_memory_graph_and_links_the_comparison_page(site):
    import chromium_cdp

    if chromium_cdp.find_chromium() is None:
        pytest.skip("no chromium on PATH; run tools/ensure_chromium.sh")
    with h.serve(site["html"]) as base:
        seen = chromium_cdp.inspect_page(f"{base}index.html#{GRAPH}", PROBE, await_promise=True,
                                         flags=chromium_cdp.OFFLINE,
                                         screenshot=str(site["tmp"] / "site.png"), full_page=False)
    value = seen["value"]
    assert seen["problems"] == [], seen["problems"]
    assert [url for url in seen["requests"] if not url.startswith(base)] == []
    assert "error" not in value, value
    series = value["series"]
    size = sum(p.stat().st_size for p in site["html"].rglob("*") if p.is_file())
    print(f"\n{GRAPH}: {len(series)} series, points per series "
          f"{sorted({s['points'] for s in series})}, drawn {sum(s['drawn'] for s in series)} of "
          f"{sum(s['points'] for s in series)}; site {size / 2**20:.2f} MiB, {len(seen['requests'])} requests")
    machines = machines_at_current_version()  # older versions' results are kept, not drawn
    assert HISTORY_MACHINE in machines
    for machine in machines:  # every machine's results are in the graph
        assert any(f"machine-{machine}" in s["label"] for s in series), machine
    assert all(s["points"] >= 1 for s in series)
    history = [s["points"] for s in series if f"machine-{HISTORY_MACHINE}" in s["label"] or len(machines) == 1]
    assert max(history) >= HISTORY_COMMITS, history
    # Points of different series can overlap; most must be visible in the canvas.
    assert sum(s["drawn"] for s in series) >= 0.5 * sum(s["points"] for s in series) > 0
    assert value["comparison"] == "comparison/index.html" and value["back"] == "../index.html"
