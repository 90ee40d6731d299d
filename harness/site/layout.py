"""The site's page shell: one inline stylesheet and the navigation bar, no scripts.

Every page is one self-contained file: no external stylesheet, font or script, so the
site opens from disk and from any static host with no outside request.
"""

import html

from harness.report import lowest

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d232b; }
nav { background: #1d2b3a; padding: 0.55em 1.2em; }
nav a { color: #e8eef5; margin-right: 1.3em; text-decoration: none; font-weight: 600; }
nav a:hover { text-decoration: underline; }
main { max-width: 1180px; margin: 0 auto; padding: 0.6em 1.4em 3em; }
h1 { font-size: 1.6em; margin: 0.6em 0 0.3em; }
h2 { font-size: 1.25em; margin: 1.4em 0 0.4em; border-bottom: 1px solid #d5dbe2; padding-bottom: 0.15em; }
h3 { font-size: 1.08em; margin: 1.1em 0 0.3em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.92em; }
th, td { border: 1px solid #d5dbe2; padding: 0.22em 0.5em; vertical-align: top; }
th { background: #eef2f6; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.none { color: #8a94a0; }
code { font: 0.9em ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #f2f4f7;
       padding: 0 0.2em; }
pre { background: #f2f4f7; padding: 0.6em 0.8em; overflow-x: auto; }
pre code { background: none; padding: 0; }
.meta { color: #4d5966; font-size: 0.9em; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: 0.8em; }
.card { border: 1px solid #d5dbe2; border-radius: 6px; padding: 0.6em 0.8em; }
.card h3 { margin-top: 0.1em; }
.down { color: #17733a; }
.up { color: #b42318; }
.note { background: #fff8e1; border-left: 4px solid #e0b400; padding: 0.4em 0.8em; }
""" + lowest.CSS + "\n"  # the comparison page's rule and colour (harness/report/lowest.py)

#: (label, path from the site's root)
NAV = (
    ("gradmem observatory", "index.html"),
    ("Comparisons", "index.html#comparisons"),
    ("Releases", "releases/index.html"),
    ("Seed reports", "seeds.html"),
    ("CUDA figures", "gpu.html"),
    ("History", "index.html#history"),
)


def page(title, body, depth=0):
    """A whole HTML page; `depth` is how many folders below the site's root it sits."""
    up = "../" * depth
    nav = "".join(f'<a href="{up}{href}">{html.escape(label)}</a>' for label, href in NAV)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n<nav>{nav}</nav>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def with_home_link(path, depth):
    """Put a link back to the front page at the top of a page another command wrote
    (the comparison, release and diff pages), `depth` folders below the site's root."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    link = (f'<p style="margin:0 0 .5em"><a href="{"../" * depth}index.html">← gradmem observatory</a></p>')
    if "<body>" in text and link not in text:
        text = text.replace("<body>", "<body>" + link, 1)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
