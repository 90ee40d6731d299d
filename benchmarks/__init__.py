"""asv entry points for gradmem (see docs/asv.md). Nothing heavy is imported here:
asv imports this package in every benchmark process."""
