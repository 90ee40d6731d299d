"""One change between two releases, made ready to file upstream (`harness report-change`).

For a change of a release store (harness/releases/): a standalone script of the
workload's step in plain framework code with a probe of the figures (inline.py,
emitters.py, programs.py, probe.py, script.py), its runs under both releases'
environments (runner.py), the verdict, reproduced standalone or harness only
(verdict.py), kept beside the store (store.py), and a report draft (draft.py); ids.py
names changes, batch.py orders a store's actionable ones cheapest first.
"""
