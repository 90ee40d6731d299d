"""The built observatory: every local link resolves, no page loads a remote resource;
and the checker itself catches each kind of problem."""

from harness.site import links


def test_every_local_link_of_the_site_resolves(site):
    assert len(links.pages(str(site))) >= 8  # front, 2+ comparisons, releases + pages, seeds, gpu
    assert links.broken_links(str(site)) == []


def test_no_page_loads_anything_from_elsewhere(site):
    assert links.remote_resources(str(site)) == []


def test_the_checker_catches_each_kind_of_problem(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.html").write_text('<h2 id="here">x</h2>')
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#here">fine</a><a href="https://example.org/thread">a link out: fine</a>'
        '<a href="missing.html">broken</a><a href="sub/page.html#nowhere">no anchor</a>'
        '<a href="../outside.html">outside</a>'
        '<script src="https://cdn.example.org/jquery.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/font.css">'
        '<img src="http://example.org/a.png"><iframe src="https://example.org/frame"></iframe>'
        '<style>body { background: url("https://example.org/bg.png") }</style>'
        '<div style="background-image: url(https://example.org/x.png)"></div>')
    broken = links.broken_links(str(tmp_path))
    assert len(broken) == 3
    assert any("missing.html (no such file)" in b for b in broken)
    assert any("no id 'nowhere'" in b for b in broken)
    assert any("outside the site" in b for b in broken)
    remote = links.remote_resources(str(tmp_path))
    assert len(remote) == 6, remote
    assert links.main([str(tmp_path)]) == 1
    assert links.main([str(tmp_path / "sub")]) == 0


def test_a_site_named_by_a_relative_path_checks_the_same(tmp_path, monkeypatch):
    # `make site` checks out/site, a relative path: a bare "#anchor" is the page itself
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text('<h2 id="top">x</h2><a href="#top">up</a><a href="#gone">no</a>')
    monkeypatch.chdir(tmp_path)
    assert links.broken_links("site") == ["index.html: #gone (no id 'gone' in index.html)"]
