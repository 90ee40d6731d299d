"""Docs of the repository as pages of the site: docs/seeds.md (the seed reports) and
docs/gpu.md (the CUDA figures), rendered by the site's small Markdown converter."""

import html
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


def verdicts(text, limit=320):
    """[(section title, its id, verdict text)] of each `## ` section's paragraphs that
    open with **Verdict (docs/seeds.md's convention), as plain text, shortened to `limit`."""
    found, section, anchor, ids = [], None, None, {}
    paragraphs = re.split(r"\n\s*\n", text)
    for block in paragraphs:
        heading = re.match(r"^(#{1,6})\s+(.*)$", block.strip())
        if heading:
            # the id the converter gives this heading (repeated titles get -1, -2 ...)
            slug = markdown.slug(heading.group(2))
            ids[slug] = ids.get(slug, -1) + 1
            if len(heading.group(1)) == 2:
                section = re.sub(r"[`*]", "", heading.group(2))
                anchor = slug if not ids[slug] else f"{slug}-{ids[slug]}"
            continue
        if section and block.strip().startswith("**Verdict"):
            plain = re.sub(r"[`*]", "", " ".join(block.split()))
            if len(plain) > limit:
                plain = plain[:limit].rsplit(" ", 1)[0] + " …"
            found.append((section, anchor, plain))
    return found


def _summary(text):
    rows = "".join(f'<tr><td><a href="#{html.escape(anchor)}">{html.escape(section)}</a></td>'
                   f"<td>{html.escape(verdict)}</td></tr>" for section, anchor, verdict in verdicts(text))
    if not rows:
        return ""
    return ("<h2>The verdicts at a glance</h2><table><thead><tr><th>report</th><th>verdict (opening; "
            "the section has the figures)</th></tr></thead><tbody>" + rows + "</tbody></table>")


def write(docs_dir, out_dir):
    """The pages of PAGES that docs_dir holds; returns {doc: page} of those written."""
    written = {}
    for doc, target in PAGES.items():
        source = os.path.join(docs_dir, doc)
        if not os.path.exists(source):
            continue
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
        converted = markdown.to_html(text, resolve)
        if doc == "seeds.md":  # the verdicts first, under the page's title
            end = converted.find("</h1>") + len("</h1>") if "</h1>" in converted else 0
            converted = converted[:end] + _summary(text) + converted[end:]
        body = f'<p class="meta">This page is <code>docs/{doc}</code> of the repository.</p>\n' + converted
        with open(os.path.join(out_dir, target), "w", encoding="utf-8") as handle:
            handle.write(page(f"gradmem: {markdown.title(text)}", body))
        written[doc] = target
    return written
