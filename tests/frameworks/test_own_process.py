"""Runs the in-process adapter tests of OWN_PROCESS adapters (Paddle) in a pytest
process of their own: see own_process.py for why."""

import os
import subprocess
import sys

import pytest

from harness import frameworks
from own_process import ENV, OWN_PROCESS

pytestmark = pytest.mark.slow  # acceptance: Paddle's copies of the adapter contract, in a pytest of their own

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ["test_adapters.py", "test_adapter_remat.py", "test_mlx_tinygrad_paddle.py", "test_saved_by_op.py",
         "test_breakdown_hooks.py"]


@pytest.mark.parametrize("name", sorted(OWN_PROCESS))
def test_in_process_tests_pass_in_a_process_of_their_own(name):
    if os.environ.get(ENV):
        pytest.skip(f"this is the own process of {os.environ[ENV]}")
    ok, reason = frameworks.get(name).available()
    if not ok:
        pytest.skip(f"{name} unavailable: {reason}")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", name,
               *(os.path.join(HERE, f) for f in FILES)]
    done = subprocess.run(command, env={**os.environ, ENV: name}, capture_output=True, text=True, timeout=1200)
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout.strip().splitlines()[-1], tail
