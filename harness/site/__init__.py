"""The observatory: one static site of everything gradmem has measured (`harness site`).

`command` writes it; each other module renders one part from what the repository holds:
`comparisons` (committed records, `harness report`'s page per device and size), `front`
(the headline comparison and the links), `releases` (every change between releases),
`docs` (docs/*.md as pages, through the small `markdown` converter), `history` (the asv
site), `layout` (the page shell), `links` (the checks a built site must pass).
"""
