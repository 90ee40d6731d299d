"""The Markdown the project's docs use, as HTML: enough for docs/seeds.md and docs/gpu.md.

Headings (with ids), paragraphs, bullet and numbered lists (one level; an indented
line continues its item), pipe tables, fenced code, block quotes; inline code,
**bold**, *italic* and [links](url). The package itself needs NumPy only, so the site
carries this small converter rather than a Markdown dependency.

A link is handed to `resolve(url)`, which returns the href to write or None: then
the link's text is shown without a link (a file the site does not hold).
"""

import html
import re

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\d+[.)]\s+(.*)$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_INLINE = re.compile(
    r"(?P<code>`+)(?P<code_text>.+?)(?P=code)"
    r"|\[(?P<link_text>[^\]]+)\]\((?P<url>[^)\s]+)\)"
    r"|\*\*(?P<bold>.+?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^*\s][^*]*?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<em2>[^_\s][^_]*?)_(?![\w_])"
)


def slug(text):
    """The id of a heading: lower case, words joined by '-' (GitHub's rule, near enough)."""
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"\s", "-", text.strip())


def inline(text, resolve=lambda url: url):
    """One line's inline Markdown as HTML (the text escaped)."""
    out, position = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[position:match.start()], quote=False))
        position = match.end()
        if match.group("code") is not None:
            out.append(f"<code>{html.escape(match.group('code_text').strip(), quote=False)}</code>")
        elif match.group("url") is not None:
            label = inline(match.group("link_text"), resolve)
            href = resolve(match.group("url"))
            out.append(f'<a href="{html.escape(href)}">{label}</a>' if href is not None else label)
        elif match.group("bold") is not None:
            out.append(f"<strong>{inline(match.group('bold'), resolve)}</strong>")
        else:
            out.append(f"<em>{inline(match.group('em') or match.group('em2'), resolve)}</em>")
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


_MOVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*→\s*(\d+(?:\.\d+)?)\s*$")
BAR_WIDTH = 140


def _move_columns(head, rows):
    """Columns whose header says "before → after" and whose every cell is "A → B" (numbers)."""
    return [i for i, title in enumerate(head) if "→" in title and rows
            and all(i < len(row) and _MOVE.match(row[i]) for row in rows)]


def move_chart(cell):
    """Two bars of one "A → B" cell on the row's own scale (the larger is full width), and B / A."""
    before, after = (float(x) for x in _MOVE.match(cell).groups())
    top = max(before, after) or 1.0
    widths = [max(1.0, BAR_WIDTH * v / top) for v in (before, after)]
    ratio = f"{after / before:.2f}×" if before else ""
    return (f'<svg width="{BAR_WIDTH + 50}" height="26" role="img" aria-label="{html.escape(cell)}">'
            f'<rect x="0" y="2" width="{widths[0]:.1f}" height="9" fill="#9aa5b1"><title>before {before:g}</title></rect>'
            f'<rect x="0" y="14" width="{widths[1]:.1f}" height="9" fill="#2f6fb0"><title>after {after:g}</title></rect>'
            f'<text x="{BAR_WIDTH + 4}" y="21" font-size="11">{ratio}</text></svg>')


def _cells(line):
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def to_html(text, resolve=lambda url: url):
    """Markdown `text` as an HTML fragment."""
    lines = text.splitlines()
    out, i = [], 0
    seen_ids = {}

    def para(block):
        return f"<p>{inline(' '.join(part.strip() for part in block), resolve)}</p>"

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        fence = _FENCE.match(stripped)
        if fence:
            language = stripped[3:].strip()
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence
            cls = f' class="language-{html.escape(language)}"' if language else ""
            out.append(f"<pre><code{cls}>{html.escape(chr(10).join(body), quote=False)}</code></pre>")
            continue
        heading = _HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2)
            anchor = slug(title)
            seen_ids[anchor] = seen_ids.get(anchor, -1) + 1
            if seen_ids[anchor]:
                anchor = f"{anchor}-{seen_ids[anchor]}"
            out.append(f'<h{level} id="{anchor}">{inline(title, resolve)}</h{level}>')
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1].strip()):
            head = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            # a column of "A → B" figures is also drawn: before (grey) and after (blue) bars
            charted = _move_columns(head, rows)
            extra = "".join(f"<th>{inline(head[i], resolve)}: drawn (grey before, blue after)</th>"
                            for i in charted)
            parts = ["<table>", "<thead><tr>" + "".join(f"<th>{inline(c, resolve)}</th>" for c in head)
                     + extra + "</tr></thead>", "<tbody>"]
            for row in rows:
                parts.append("<tr>" + "".join(f"<td>{inline(c, resolve)}</td>" for c in row)
                             + "".join(f"<td>{move_chart(row[i])}</td>" for i in charted) + "</tr>")
            parts.append("</tbody></table>")
            out.append("\n".join(parts))
            continue
        if stripped.startswith(">"):
            block = []
            while i < len(lines) and lines[i].strip().startswith(">"):
                block.append(lines[i].strip()[1:].lstrip())
                i += 1
            out.append(f"<blockquote>{to_html(chr(10).join(block), resolve)}</blockquote>")
            continue
        for pattern, tag in ((_BULLET, "ul"), (_NUMBERED, "ol")):
            if pattern.match(line):
                items = []
                while i < len(lines):
                    item = pattern.match(lines[i])
                    if item:
                        items.append([item.group(1)])
                    elif lines[i].strip() and lines[i][:1] in (" ", "\t") and items:
                        items[-1].append(lines[i].strip())  # an indented line continues the item
                    else:
                        break
                    i += 1
                body = "".join(f"<li>{inline(' '.join(item), resolve)}</li>" for item in items)
                out.append(f"<{tag}>{body}</{tag}>")
                break
        else:
            block = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines, i):
                block.append(lines[i])
                i += 1
            out.append(para(block))
    return "\n".join(out)


def _starts_block(lines, i):
    line = lines[i]
    stripped = line.strip()
    return bool(_FENCE.match(stripped) or _HEADING.match(line) or _BULLET.match(line) or _NUMBERED.match(line)
                or stripped.startswith(">")
                or (stripped.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1].strip())))


def title(text, default="gradmem"):
    """The first heading's text (plain), or `default`."""
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            return re.sub(r"[`*_]", "", heading.group(2))
    return default
