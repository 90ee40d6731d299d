"""gradmem: peak memory and time of autodiff, the same workloads in every framework.

Layout (docs/design.md): `ops` is the op contract, `workloads/` the models written once
against it, `frameworks/` one adapter per framework, `engine/` our reference autodiff,
`measure/` one cell in a fresh process, `results` the record, `report/` the site.
"""
__version__ = "0.1.0"
