"""Framework versions as an axis of the matrix: each version in an environment of its own.

- pins.py: a sweep's ``--framework`` with versions, every pinned version checked before
  anything runs;
- spec.py: ``--framework jax==0.9.2,torch`` parsed (an exact PEP 440 version, or the
  installed one);
- index.py: the released versions on the package index (``pip index versions``), the
  versions between two, the nearest to a version that does not exist;
- envs.py: one cached environment per (framework, version, Python), built on first use
  by pip under the user's cache directory, whose interpreter runs that version's
  workers (era.py: an old release's NumPy/SciPy; interpreters.py: the Pythons of this
  host; shared_files.py: files hard-linked between a framework's environments;
  install.py: pip's runs and their last lines);
- code_link.py: this checkout's harness run by such an environment's interpreter;
- commits.py: a framework's git commit installed into an environment of its own (stage
  2 of `python -m harness bisect`, harness/bisect/).

The sweep (harness/sweep/) and the commands above it use these; nothing here imports
them.
"""
