"""Docs of the repository as pages of the site: docs/seeds.md (the seed reports) and
docs/gpu.md (the CUDA figures), rendered by the site's small Markdown converter."""

import os
import re

from harness.site import markdown
from harness.site.layout import page

#: doc in docs/ -> the page it becomes (at the site's root)
PAGES = {"seeds.md": "seeds.html", "gpu.md": "gpu.html"}


def resolve(url):
    """A doc's link as an href inside the site, or None where the site has no such page
    (another doc, a file of the repository: its text is shown without a link)."""
    if url.startswith("#") or re.match(r"^[a-z]+://", url) or url.startswith("mailto:"):
        return url
    path, _, anchor = url.partition("#")
    name = os.path.basename(path)
    if name in PAGES and os.path.dirname(path) in ("", ".", "docs", "../docs"):
        return PAGES[name] + (f"#{anchor}" if anchor else "")
    return None


def write(docs_dir, out_dir):
    """The pages of PAGES that docs_dir holds; returns {doc: page} of those written."""
    written = {}
    for doc, target in PAGES.items():
        source = os.path.join(docs_dir, doc)
        if not os.path.exists(source):
            continue
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
        body = (f'<p class="meta">This page is <code>docs/{doc}</code> of the repository.</p>\n'
                + markdown.to_html(text, resolve))
        with open(os.path.join(out_dir, target), "w", encoding="utf-8") as handle:
            handle.write(page(f"gradmem: {markdown.title(text)}", body))
        written[doc] = target
    return written
