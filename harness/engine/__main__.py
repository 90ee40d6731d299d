"""`python -m harness.engine`: the engine's headline figures (see demo.py)."""

from harness.engine.demo import main

main()
