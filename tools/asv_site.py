#!/usr/bin/env python
"""The history site that opens offline: `asv publish`, then asv's CDN scripts made local.

asv's page (asv/www/index.html) loads jQuery, flot, bootstrap and four more files from
CDNs; without internet it shows only "Can not determine continental origin of
swallow". This keeps pinned copies from the npm registry (tools/asv_site_assets.json)
and points the published page at them, so the site works from any static host with no
outside request. It can also put the comparison page of a sweep beside it, each
linking to the other.

    python tools/asv_site.py vendor        # set-up (make setup): npm pack, check, unpack
    python tools/asv_site.py publish       # asv publish + local assets -> html_dir
    python tools/asv_site.py publish --comparison out/asv-sweep.jsonl   # + comparison/
    python -m http.server -d out/asv-site  # or `asv preview`: the site needs HTTP

Opened from disk (file://) asv's page cannot work: it loads its data by requests a
browser refuses there, and asv then shows its "make sure you have an active internet
connection" page. The published page instead goes at once to an error page that says
so and gives the command that serves it (`explain_from_disk`; `--serve-root` names the
folder to serve when the site sits inside a bigger one, as the observatory's history/).

Exit 0 on success, 2 with a message naming the fix when something is missing or a
pinned file does not match its hash.
"""

import argparse
import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "tools", "asv_site_assets.json")
DEFAULT_ASSETS = os.path.join(ROOT, ".venv", "asv-www")
STAMP = ".manifest-sha256"
VENDOR = "vendor"  # the copies' folder inside the site
COMPARISON = "comparison"  # the comparison page's folder inside the site
NAV_ANCHOR = '<li id="nav-li-regressions">'


class SiteError(RuntimeError):
    """Something the site needs is missing or wrong; the message says what to do."""


def load_manifest(path=MANIFEST):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _digest(path, algorithm):
    hasher = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.digest()


def sri(path, algorithm="sha256"):
    """Subresource-integrity string of a file ("sha256-<base64>")."""
    return f"{algorithm}-{base64.b64encode(_digest(path, algorithm)).decode()}"


def _files(manifest, package):
    """Every file of `package` the site needs (the referenced one and what it refers to)."""
    names = []
    for asset in manifest["assets"]:
        if asset["package"] == package:
            names += [asset["file"], *asset.get("with", [])]
    return names


def vendored(dest, manifest, manifest_path=MANIFEST):
    """True when `dest` holds every file of this manifest (its stamp matches)."""
    try:
        with open(os.path.join(dest, STAMP), encoding="utf-8") as handle:
            stamp = handle.read().strip()
    except OSError:
        return False
    return stamp == sri(manifest_path) and all(
        os.path.isfile(os.path.join(dest, package, name))
        for package in manifest["packages"] for name in _files(manifest, package)
    )


def npm_pack(package, version, workdir):
    """Fetch a registry tarball with npm; return its path."""
    npm = shutil.which("npm")
    if not npm:
        raise SiteError("npm not found: the history site's scripts come from the npm registry at set-up; "
                        "install npm (Debian/Ubuntu: apt-get install npm) and run `make setup` again")
    done = subprocess.run([npm, "pack", f"{package}@{version}", "--json", "--pack-destination", workdir],
                          capture_output=True, text=True, cwd=workdir)
    if done.returncode != 0:
        raise SiteError(f"npm pack {package}@{version} failed:\n{done.stderr.strip()[-2000:]}")
    return os.path.join(workdir, os.path.basename(json.loads(done.stdout)[0]["filename"]))


def vendor(dest=DEFAULT_ASSETS, manifest_path=MANIFEST):
    """Fetch the pinned packages, check each tarball against its pinned integrity, unpack
    the files the site needs into dest/<package>/. Does nothing when already done."""
    manifest = load_manifest(manifest_path)
    if vendored(dest, manifest, manifest_path):
        return False
    staging = tempfile.mkdtemp(prefix=".asv-www-", dir=os.path.dirname(os.path.abspath(dest)))
    try:
        with tempfile.TemporaryDirectory(prefix="gradmem-npm-") as work:
            for package, pin in manifest["packages"].items():
                tarball = npm_pack(package, pin["version"], work)
                algorithm = pin["integrity"].split("-", 1)[0]
                got = sri(tarball, algorithm)
                if got != pin["integrity"]:
                    raise SiteError(f"{package}@{pin['version']}: tarball integrity {got} is not the pinned "
                                    f"{pin['integrity']} ({manifest_path})")
                with tarfile.open(tarball) as archive:
                    for name in _files(manifest, package):
                        member = archive.extractfile(f"package/{name}")
                        if member is None:
                            raise SiteError(f"{package}@{pin['version']} has no {name}")
                        target = os.path.join(staging, package, name)
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        with open(target, "wb") as out:
                            shutil.copyfileobj(member, out)
        with open(os.path.join(staging, STAMP), "w", encoding="utf-8") as handle:
            handle.write(sri(manifest_path) + "\n")
        os.chmod(staging, 0o755)
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def _tag_with_url(page, url):
    match = re.search(r'<(?:script|link)\b[^>]*\b(?:src|href)="' + re.escape(url) + r'"[^>]*>', page)
    if not match:
        raise SiteError(f"asv's index.html no longer loads {url}: update tools/asv_site_assets.json "
                        f"for this asv version")
    return match


def localize(html_dir, assets=DEFAULT_ASSETS, manifest_path=MANIFEST):
    """Copy the vendored files into html_dir/vendor/ and point index.html at them."""
    manifest = load_manifest(manifest_path)
    if not vendored(assets, manifest, manifest_path):
        raise SiteError(f"the site's scripts are not in {assets}: run `python tools/asv_site.py vendor` "
                        f"(part of `make setup`)")
    index = os.path.join(html_dir, "index.html")
    with open(index, encoding="utf-8") as handle:
        page = handle.read()
    for asset in manifest["assets"]:
        source = os.path.join(assets, asset["package"], asset["file"])
        local = f"{VENDOR}/{asset['package']}/{asset['file']}"
        match = _tag_with_url(page, asset["url"])
        tag = match.group(0).replace(f'"{asset["url"]}"', f'"{local}"')
        integrity = re.search(r'\bintegrity="([^"]*)"', tag)
        if asset["same_bytes"]:
            # asv's own hash must match the copy: the browser checks it again on load.
            if integrity and integrity.group(1) != sri(source, integrity.group(1).split("-", 1)[0]):
                raise SiteError(f"{asset['package']}/{asset['file']} is not the file asv pins for {asset['url']}")
        else:  # another build of the same release: asv's hash is of the CDN's bytes
            tag = re.sub(r'\s+(?:integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)
        page = page[:match.start()] + tag + page[match.end():]
        for name in [asset["file"], *asset.get("with", [])]:
            target = os.path.join(html_dir, VENDOR, asset["package"], name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(assets, asset["package"], name), target)
    leftover = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="((?:https?:)?//[^"]+)"', page)
    if leftover:
        raise SiteError(f"asv's index.html loads {', '.join(leftover)}, not in tools/asv_site_assets.json")
    _write(index, page)


#: where asv's page sends the reader when a script fails to load (asv/www/index.html)
ERROR_PAGE = "error.html"
#: put first in the page's <head>: from disk nothing of it can work, so say why at once
FROM_DISK = (f'<script>if (window.location.protocol === "file:") {{ window.location.replace("{ERROR_PAGE}"); }}'
             "</script>")
FROM_DISK_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gradmem history: open it over HTTP</title>
<style>body {{ font: 15px/1.45 system-ui, sans-serif; max-width: 46em; margin: 2em auto; padding: 0 1em; }}
pre {{ background: #f2f4f7; padding: .6em .8em; }}</style></head>
<body><h1>The history per commit needs HTTP</h1>
<p>This is asv's history site. Its page loads its data (index.json, each graph's
figures) by script, and a browser refuses such requests on a page opened from disk
(<code>file://</code>), so it cannot be shown that way: nothing is wrong with your
connection, nothing is fetched from the internet.</p>
<p>Serve it and open it over HTTP, from the folder the site was built in:</p>
<pre>python -m http.server -d {serve_root}</pre>
<p>then open <a href="http://localhost:8000/{path}">http://localhost:8000/{path}</a>.
On a static host (GitHub Pages, any web server) it works as is.</p>
<p>Seen over HTTP, this page means one of the page's scripts did not load: they are
the pinned copies in <code>vendor/</code>, which <code>make setup</code> fetches
(<code>python tools/asv_site.py vendor</code>).</p>
</body></html>
"""


def explain_from_disk(html_dir, serve_root=None):
    """Make the published page say how to open it: index.html goes to error.html when
    opened from disk, and error.html (asv's says "check your internet connection") says
    why and gives the command that serves `serve_root` (default: html_dir itself) and the
    address of the page below it."""
    serve_root = serve_root or html_dir
    path = os.path.relpath(html_dir, serve_root).replace(os.sep, "/")
    path = "" if path == "." else path.rstrip("/") + "/"
    index = os.path.join(html_dir, "index.html")
    with open(index, encoding="utf-8") as handle:
        page = handle.read()
    head = re.search(r"<head[^>]*>", page)
    if head is None:
        raise SiteError("asv's index.html has no <head> to put the from-disk check in")
    if FROM_DISK not in page:
        page = page[:head.end()] + "\n    " + FROM_DISK + page[head.end():]
        _write(index, page)
    _write(os.path.join(html_dir, ERROR_PAGE),
           FROM_DISK_PAGE.format(serve_root=html.escape(serve_root), path=html.escape(path)))


def link_comparison(html_dir, label="Comparison page"):
    """Add a navbar entry to html_dir/comparison/index.html."""
    index = os.path.join(html_dir, "index.html")
    with open(index, encoding="utf-8") as handle:
        page = handle.read()
    if NAV_ANCHOR not in page:
        raise SiteError(f"asv's index.html has no {NAV_ANCHOR!r} to put the comparison link after")
    entry = f'<li id="nav-li-comparison"><a href="{COMPARISON}/index.html">{html.escape(label)}</a></li>'
    end = page.index("</li>", page.index(NAV_ANCHOR)) + len("</li>")
    _write(index, page[:end] + "\n\t" + entry + page[end:])


def _write(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def site_bytes(html_dir):
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(html_dir) for name in names)


def publish(config="asv.conf.json", comparison=None, assets=DEFAULT_ASSETS, serve_root=None):
    """asv publish, local assets, the page's from-disk explanation (`serve_root`: the
    folder to serve, default the site's own), and the comparison page of `comparison`
    (JSONL files)."""
    from asv.config import Config

    html_dir = os.path.abspath(Config.load(config).html_dir)
    asv = os.path.join(os.path.dirname(sys.executable), "asv")
    done = subprocess.run([asv, "publish", "--config", config])
    if done.returncode != 0:
        raise SiteError(f"asv publish failed ({done.returncode})")
    localize(html_dir, assets)
    explain_from_disk(html_dir, serve_root or os.path.relpath(html_dir))
    if comparison:
        from harness.report.page import write_page
        from harness.report.records import RecordError

        try:
            write_page(comparison, os.path.join(html_dir, COMPARISON), history_url="../index.html")
        except RecordError as err:
            raise SiteError(f"comparison page: {err}") from None
        link_comparison(html_dir)
    return html_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("vendor", help="fetch the pinned scripts and styles (set-up; needs npm)")
    fetch.add_argument("--dest", default=DEFAULT_ASSETS, help=f"where to keep them (default {DEFAULT_ASSETS})")
    pub = sub.add_parser("publish", help="asv publish, then point the site at the local copies")
    pub.add_argument("--config", default="asv.conf.json")
    pub.add_argument("--assets", default=DEFAULT_ASSETS, help="the vendored files (default %(default)s)")
    pub.add_argument("--comparison", nargs="+", metavar="SWEEP.jsonl",
                     help="also write the comparison page of these records to <site>/comparison/")
    pub.add_argument("--serve-root", metavar="DIR",
                     help="the folder a reader serves over HTTP to see the site, named on its from-disk page "
                          "(default: the site's own folder; the observatory's: the folder above history/)")
    args = parser.parse_args(argv)
    try:
        if args.command == "vendor":
            changed = vendor(args.dest)
            print(f"{args.dest}: " + ("vendored" if changed else "up to date"))
        else:
            site = publish(args.config, args.comparison, args.assets, args.serve_root)
            print(f"site: {site} ({site_bytes(site) / 2**20:.1f} MiB); serve it over HTTP, e.g. "
                  f"python -m http.server -d {os.path.relpath(site)}")
    except SiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
