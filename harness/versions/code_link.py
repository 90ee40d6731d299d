"""This checkout's `harness` package, run by another interpreter: a pinned version's
environment, or a commit's install.

A worker in such an environment runs the *running* gradmem's code, not whatever copy
of gradmem the environment was built with, so a record's git commit says what measured
it: `worker_environment` puts first on its PYTHONPATH a directory holding only a link
to this package (`code_path`), then a commit's install where there is one.
"""

import os

#: made once per process: the code directory per workdir
_made = {}


def code_path(workdir):
    """A directory holding only a link to the running `harness` package: first on a
    worker's PYTHONPATH, it makes the worker run this code in another environment."""
    found = _made.get(workdir)
    if found and os.path.isdir(found):
        return found
    directory = os.path.join(workdir, "gradmem-code")
    os.makedirs(directory, exist_ok=True)
    harness_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    link = os.path.join(directory, "harness")
    if not os.path.lexists(link):
        os.symlink(harness_dir, link)
    _made[workdir] = directory
    return directory


def worker_environment(env, workdir, extra_paths=()):
    """`env` (a worker's environment dict) changed to run this gradmem's code in another
    interpreter: PYTHONPATH = the code link, then `extra_paths` (a commit's install)."""
    paths = [code_path(workdir), *extra_paths]
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("PYTHONHOME", None)
    return env
