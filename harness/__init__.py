"""gradmem: peak memory and time of autodiff, the same workloads in every framework.

Layout (docs/design.md, "Layout"). Every command `python -m harness NAME` is
`<package>/command.py` (cli.py maps the names), its logic beside it in its package:

- `workloads/` the models, written once against `ops` (the op contract), one file each
  (its `command` is `new-workload`); `steps/` your own training step in plain framework
  code, measured as written (`new-step`); `frameworks/` one adapter per framework;
  `engine/` our reference autodiff;
- `sweep/` plans cells and starts one fresh worker per pass (`run`); `measure/` what
  runs inside a worker; `check/` every gradient against the reference engine's;
  `scale/` memory against the batch; `versions/` a framework's versions as an axis, in
  environments of their own; `bisect/` the release or commit that moved a figure
  (`bisect`); `releases/` every release of a framework, and its changes;
  `upstream/` one change made ready to file upstream: a standalone script, its runs
  under both releases, a report draft (`report-change`);
- `report/` the comparison page; `diff/` why two records differ; `site/` the
  observatory; `inventory/` what this machine can measure (`list`).

What every room shares stays at the top: `cli` (the entry), `cli_options` (the shared
options), `choices` (the valid names), `units` (bytes), `remat_strategies` (the remat
strategies' names and segmentation, read by the engine and the adapters), `results`
(the record and its files), `figures` (how each figure is read from a record),
`origin` (a record's provenance), `interrupts` (signals), `console`; and two
integrations, `asv_env` (asv's environments) and `pytest_plugin` (the step_memory
marker).
"""
__version__ = "0.1.0"
