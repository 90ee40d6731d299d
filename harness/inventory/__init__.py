"""`harness list`: what this machine can measure (`command`): the workloads with their
sizes, the frameworks with their versions, modes and devices."""
