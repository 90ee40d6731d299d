"""harness/origin.py: what a figure was measured on. The commit is the checkout's own,
wherever the module sits in the package (a move once pointed it one folder too high,
and every record said "unknown")."""

import os
import subprocess

from harness import origin


def test_the_commit_is_the_checkout_the_harness_runs_from():
    here = os.path.dirname(os.path.abspath(origin.__file__))
    top = subprocess.run(["git", "-C", here, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:  # an installed copy outside any checkout: "unknown" is the truth
        assert origin.git_commit() == "unknown"
        return
    assert os.path.realpath(origin.PACKAGE_DIR) == os.path.realpath(top.stdout.strip())
    head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert origin.git_commit().split("+")[0] == head.stdout.strip()
