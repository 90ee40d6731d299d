"""Framework versions as an axis of the matrix, and bisection inside a framework.

- command.py: ``python -m harness bisect``, the first release or commit that moved a
  figure (its findings: findings.py);
- pins.py: a sweep's ``--framework`` with versions, every pinned version checked before
  anything runs;
- spec.py: ``--framework jax==0.9.2,torch`` parsed (an exact PEP 440 version, or the
  installed one);
- index.py: the released versions on the package index (``pip index versions``), the
  versions between two, the nearest to a version that does not exist;
- envs.py: one cached environment per (framework, version, Python), built on first use
  by pip under the user's cache directory, whose interpreter runs that version's
  workers;
- commits.py: a framework's git commit installed into an environment of its own (stage
  2 of `python -m harness bisect`);
- bisection.py: the bisection itself, over any ordered list of candidates.
"""
