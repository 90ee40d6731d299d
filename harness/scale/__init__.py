"""`python -m harness scale`: memory against the batch (harness/scale/command.py).

fit.py: least-squares lines and the largest batch under a budget; batches.py: the
batch list or the auto series; series.py: records of one cell at several batches and
their fits; passes.py: the one place memory passes are submitted; table.py: what the
command prints. The page's scaling section is harness/report/scaling.py.
"""
