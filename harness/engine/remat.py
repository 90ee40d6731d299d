"""Rematerialisation in the reference engine: the ``checkpoint`` and ``chain`` ops.

Placeholder: the plain call and the plain loop (remat "none")."""

from harness.frameworks.remat import chain, checkpoint  # noqa: F401
