"""`python -m harness diff`: why two records' figures differ (command.py)."""
