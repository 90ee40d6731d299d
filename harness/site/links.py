"""What a built site must pass: every local link resolves (file and anchor), and no page
loads a resource from elsewhere (a script, stylesheet, image, frame, font or media
file from an http(s):// or protocol-relative URL). A link a reader follows to another
site (an <a href> to a report's thread) is not a resource and is allowed.

    python -m harness.site.links DIR    # exit 1 naming each problem

The asv history's own pages (DIR/history/ but its index.html) are asv's and load
their data by script; they are left to tools/asv_site.py's checks.
"""

import os
import re
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

#: (tag, attribute) pairs whose URL the browser fetches by itself when the page loads
RESOURCE_ATTRIBUTES = {("script", "src"), ("link", "href"), ("img", "src"), ("img", "srcset"),
                       ("iframe", "src"), ("frame", "src"), ("embed", "src"), ("object", "data"),
                       ("source", "src"), ("source", "srcset"), ("video", "src"), ("video", "poster"),
                       ("audio", "src"), ("track", "src"), ("input", "src"), ("image", "href")}
_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.IGNORECASE)
_NOT_FILES = ("mailto:", "data:", "javascript:", "tel:")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.resources, self.ids, self._in_style = [], [], set(), False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            if name == "style":
                self.resources += _CSS_URL.findall(value)
            if (tag, name) in RESOURCE_ATTRIBUTES:
                self.resources.append(value)
                if tag != "link" or not _REMOTE.match(value):
                    self.links.append(value)
            elif name in ("href", "src", "xlink:href"):
                self.links.append(value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.resources += _CSS_URL.findall(data)


def _parse(path):
    page = _Page()
    with open(path, encoding="utf-8", errors="replace") as handle:
        page.feed(handle.read())
    return page


def pages(site_dir):
    """The site's HTML pages that these checks cover (paths)."""
    found = []
    for folder, _, names in os.walk(site_dir):
        for name in sorted(names):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, site_dir).replace(os.sep, "/")
            if name.endswith(".html") and (not rel.startswith("history/") or rel == "history/index.html"):
                found.append(path)
    return sorted(found)


def remote_resources(site_dir):
    """["PAGE: URL"] of every resource a page would load from elsewhere."""
    problems = []
    for path in pages(site_dir):
        for url in _parse(path).resources:
            if _REMOTE.match(url) or any(_REMOTE.match(part.split()[0]) for part in url.split(",") if part.strip()):
                problems.append(f"{os.path.relpath(path, site_dir)}: loads {url}")
    return problems


def broken_links(site_dir):
    """["PAGE: URL (why)"] of every local link that does not resolve inside the site."""
    problems, ids = [], {}
    root = os.path.realpath(site_dir)
    for path in pages(site_dir):
        for url in _parse(path).links:
            if _REMOTE.match(url) or url.startswith(_NOT_FILES) or re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I):
                continue
            parts = urlsplit(url)
            # a bare "#anchor" points into the page itself, wherever the site was named from
            target = os.path.realpath(os.path.join(os.path.dirname(path), unquote(parts.path)) if parts.path else path)
            where = f"{os.path.relpath(path, site_dir)}: {url}"
            if not (target == root or target.startswith(root + os.sep)):
                problems.append(f"{where} (outside the site)")
            elif os.path.isdir(target):
                if not os.path.exists(os.path.join(target, "index.html")):
                    problems.append(f"{where} (a folder without index.html)")
            elif not os.path.exists(target):
                problems.append(f"{where} (no such file)")
            elif parts.fragment and target.endswith(".html") and not parts.fragment.startswith("/"):
                # ("#/route": a script's route, as asv's page uses, not an anchor)
                if target not in ids:
                    ids[target] = _parse(target).ids
                if unquote(parts.fragment) not in ids[target]:
                    problems.append(f"{where} (no id {parts.fragment!r} in {os.path.relpath(target, site_dir)})")
    return problems


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: python -m harness.site.links SITE_DIR", file=sys.stderr)
        return 2
    problems = broken_links(argv[0]) + remote_resources(argv[0])
    for problem in problems:
        print(problem)
    print(f"{len(pages(argv[0]))} pages, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
