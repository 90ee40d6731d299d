"""The first release or commit of a framework that moved a figure (`harness bisect`).

- command.py: ``python -m harness bisect``, stage 1 over the released versions (each in
  its cached environment, harness/versions/envs.py), stage 2 over a checkout's commits
  (each installed by harness/versions/commits.py); one memory pass per probe, through
  the sweep's worker (harness/sweep/worker_process.py);
- bisection.py: the bisection itself, over any ordered list of candidates;
- findings.py: what ``--record FILE`` leaves behind, one finding per bisection (a
  release store's FRAMEWORK.commits.json, read by harness/releases/).
"""
