"""gradmem: peak memory and time of autodiff, the same workloads in every framework.

Layout (docs/design.md): `ops` is the op contract, `workloads/` the models written once
against it, `frameworks/` one adapter per framework, `engine/` our reference autodiff,
`sweep/` plans cells and starts one fresh worker process per pass, `measure/` what runs
inside a worker, `results` the record, `report/` the site.
"""
__version__ = "0.1.0"
