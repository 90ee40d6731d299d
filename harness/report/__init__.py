"""The comparison page: static HTML (inline SVG and CSS, no scripts) from result files.

`build` is the `python -m harness report` command; the other modules each render
one part of the page from result records (see /tmp/result_schema.md, harness/results.py).
"""
