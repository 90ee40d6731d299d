"""The sweep: plans cells, launches each pass as a fresh worker process, writes records.

The parent's side of every measurement; it never imports a framework. What runs inside
a worker is harness/measure/ (arrows point one way: sweep -> measure, never back).

- ``api``: a sweep callable from code, ``run(cells, options, out, how)``: what
  ``harness run`` does after reading its arguments (progress, `--resume`, `--budget`,
  the table), called by ``command`` (``python -m harness run``), `harness releases`
  for each round and the step_memory marker; ``plan`` the cells of run's axes;
- ``memory_passes``: memory passes alone, each record handed back as it ends (`harness
  scale`, the releases' side-by-side confirmation);
- ``cells``: the matrix of cells, their labels, and why a cell cannot run here;
- ``cell_runner``: one cell = reference gradient + memory pass + time pass -> one
  record; ``SETTINGS``/``Options``: the sweep settings every record carries;
- ``schedule``: when each pass runs (serial, the default; or parallel memory passes
  with time passes alone); ``executor``: runs passes here (submit, outcomes,
  cancel_all); ``ray_executor``/``node_pass``: the same passes as Ray tasks on a
  cluster's nodes;
- ``worker_process``: starts one worker (``python -m harness.measure.worker``), waits,
  kills its group on timeout or signal, classifies its end (measure/failures.py);
- ``zygote``: workers forked from a process that has imported their framework;
- ``environment``: the environment a worker starts with, per pass kind;
- ``resume``: the cells of `--resume` already in the result file;
- ``outcome``: the exit status from the cells' records (0, 4 some failed, 3 none measured);
- ``pass_log``: a ``--schedule-log`` file told from a result file by its lines;
- ``timeline``: the worker's RSS sampled from the parent; ``summary_table``: the table
  printed at the end of a sweep.

Used by other commands too: `harness check` (check/framework_runner.py) and `bisect`
start their workers through ``worker_process`` and ``environment``. Shared with
them at the package's top: harness/interrupts.py (SIGTERM, SIGHUP, Ctrl-C) and
harness/origin.py (git commit, machine, versions: a record's provenance).
"""
