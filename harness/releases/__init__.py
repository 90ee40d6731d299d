"""`python -m harness releases`: every release of a framework measured, and the changes between them.

listing.py (the releases in a range, yanked ones named), sweep.py (each release in its
cached environment through `harness run`, repeated rounds), store.py (the records and
their rounds), detect.py (changes beyond each cell's measured run-to-run band),
side_by_side.py and confirm.py (each flagged change measured again with its two
releases interleaved, and listed only if that holds), page.py (the static page per
framework), command.py (the CLI).
"""
