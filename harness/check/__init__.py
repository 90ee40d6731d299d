"""`harness check`: every framework's gradient against the reference engine's.

`command` plans the cells, compares each gradient and prints the table;
`framework_runner` computes one framework's cells in a worker process of its own
(the worker's side is harness/measure/gradients.py).
"""
