"""`python -m harness scale`: memory against the batch (harness/scale/command.py).

fit.py: least-squares lines and the largest batch under a budget; batches.py: the
batch list or the auto series; series.py: records of one cell at several batches and
their fits; table.py: what the command prints. Its memory passes run through the
sweep's one runner of memory passes alone (harness/sweep/memory_passes.py). The
page's scaling section is harness/report/scaling.py.
"""
