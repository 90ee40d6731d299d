"""The comparison page: static HTML (inline SVG and CSS, no scripts) from result files.

`command` is `python -m harness report`; `page` writes the page; every other module
renders one part of it from result records (their fields: harness/results.py; their
figures, read only through harness/figures.py).
"""
