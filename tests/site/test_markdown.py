"""The site's Markdown converter on what the docs use."""

from harness.site import docs, markdown


def test_blocks():
    text = """# Title `code`

A paragraph
over two lines with **bold**, *italic* and `a < b`.

## Title `code`

- one item
  continued
- two

1. first
2. second

| a | b |
|---|--:|
| `x \\| y` | 2 |

```bash
echo "<tag>"
```

> quoted
"""
    out = markdown.to_html(text)
    assert '<h1 id="title-code">Title <code>code</code></h1>' in out
    assert '<h2 id="title-code-1">' in out  # a repeated heading gets its own id
    assert "<p>A paragraph over two lines with <strong>bold</strong>, <em>italic</em> and <code>a &lt; b</code>.</p>" in out
    assert "<ul><li>one item continued</li><li>two</li></ul>" in out
    assert "<ol><li>first</li><li>second</li></ol>" in out
    assert "<thead><tr><th>a</th><th>b</th></tr></thead>" in out and "<td><code>x | y</code></td><td>2</td>" in out
    assert '<pre><code class="language-bash">echo "&lt;tag&gt;"</code></pre>' in out
    assert "<blockquote><p>quoted</p></blockquote>" in out
    assert markdown.title(text) == "Title code"


def test_links_inside_the_site_stay_links_and_others_become_text():
    out = markdown.to_html("[seeds](seeds.md#x), [gpu](../docs/gpu.md), [design](design.md), "
                           "[asv](https://asv.readthedocs.io), [here](#top)", docs.resolve)
    assert '<a href="seeds.html#x">seeds</a>' in out and '<a href="gpu.html">gpu</a>' in out
    assert "design" in out and "design.md" not in out
    assert '<a href="https://asv.readthedocs.io">asv</a>' in out and '<a href="#top">here</a>' in out


def test_snake_case_names_are_not_italic():
    assert "<em>" not in markdown.inline("chained_dot and tiny_nerf and seq2seq_attention")


def test_a_column_of_moves_is_also_drawn():
    out = markdown.to_html("| cell | before → after (MiB) |\n|---|---|\n| a | 145.38 → 51.64 |\n| b | 2 → 4 |\n")
    assert out.count("<svg") == 2 and "drawn (grey before, blue after)" in out
    first, second = out.split("<svg")[1:]
    # one row's own scale: the larger figure is the full bar, the other in proportion
    assert f'width="{markdown.BAR_WIDTH:.1f}"' in first and f'width="{markdown.BAR_WIDTH * 51.64 / 145.38:.1f}"' in first
    assert "0.36×" in first and "2.00×" in second
    assert "<svg" not in markdown.to_html("| a | b → c |\n|---|---|\n| x | not a number |\n")
