"""A framework's git history: the commits between two revisions, each installed into an
environment of its own (stage 2 of `python -m harness bisect`).

The commits are the first-parent chain from good to bad (``git rev-list
--first-parent``, as asv walks a range), so the list is ordered and a merge counts as
one step. A commit is installed from ``git archive`` of that commit (no checkout of the
user's repository is touched): pure-Python frameworks (HIPS autograd) straight with pip,
with their own requirements resolved against gradmem's pins; compiled ones only through
the user's ``--build-hook CMD``, run in a scratch worktree of the commit with
``$GRADMEM_WHEEL_DIR`` where it must leave the wheel(s) to install.

Environments are cached like releases' (envs.py): ``NAME-commit-base-HASH`` (gradmem's,
the adapter's and the framework's own requirements as the release installed here
declares them, pinned to the versions installed here; HASH names that list) once, and
per commit a layer ``NAME-commit-SHA12`` holding only the commit's package (``pip install
--no-deps --target``; a commit needing a dependency the base lacks fails at import,
recorded as that probe's error).
"""

import glob
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import tarfile
import tempfile

from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable
from harness.versions import envs, install

def git(repo, *args, check=True):
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise ChoiceError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def check_repo(repo):
    if not os.path.isdir(repo):
        raise ChoiceError(f"--repo {repo}: no such directory")
    done = subprocess.run(["git", "-C", repo, "rev-parse", "--git-dir"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ChoiceError(f"--repo {repo}: not a git repository ({done.stderr.strip()})")


def resolve(repo, revision, option):
    """The full hash of `revision` (tag, branch, hash); ChoiceError naming it when absent."""
    done = subprocess.run(
        ["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True, text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        tags = git(repo, "tag", "--sort=-creatordate", check=False).splitlines()[:8]
        hint = f"; recent tags: {', '.join(tags)}" if tags else ""
        raise ChoiceError(f"{option} {revision!r}: no such revision in {repo}{hint}")
    return done.stdout.strip()


def between(repo, good, bad):
    """[good, c1, ..., bad]: full hashes, oldest first, along bad's first-parent chain."""
    if good == bad:
        raise ChoiceError("--good and --bad are the same commit: nothing to bisect")
    ancestor = subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", good, bad])
    if ancestor.returncode != 0:
        raise ChoiceError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}: give the older revision as --good")
    chain = git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()
    return [good] + chain


def subject(repo, commit):
    return git(repo, "log", "-1", "--format=%s", commit)


def short(repo, commit):
    return f"{commit[:12]} {subject(repo, commit)}"


def environment(adapter, repo, commit, build_hook=None):
    """The environment of `adapter`'s framework at `commit` of `repo`: a shared base
    (gradmem's and the adapter's requirements, pinned as for releases) and a layer of
    its own holding the commit, installed with ``pip install --no-deps --target``
    (Unavailable when it cannot be installed)."""
    if build_hook is None and not adapter.installs_from_source:
        raise Unavailable(
            f"{adapter.name} is compiled: a commit is installed only through --build-hook CMD "
            f"(run in a checkout of the commit; it must leave a wheel in $GRADMEM_WHEEL_DIR)"
        )
    pins = envs.runtime_pins(also=tuple(adapter.adapter_requires) + _framework_requirements(adapter))
    dists = adapter.distributions + tuple(adapter.adapter_requires)
    # named by what it holds: a base cached before it held the framework's requirements is not reused
    base_name = f"{adapter.name}-commit-base-{hashlib.sha256(' '.join(sorted(pins)).encode()).hexdigest()[:8]}"
    # an adapter may name an older era's requirements (2017 autograd: NumPy 1.23, future)
    era = getattr(adapter, "commit_requirements", lambda repo, commit: None)(repo, commit)
    if era is not None:
        base_name, pins = f"{base_name}-{era[0]}", list(era[1])
        dists = dists + tuple(p.split("==")[0] for p in era[1] if p.split("==")[0] not in dists)
    base = envs.build(base_name, pins, dists=dists)

    def install_commit(python, site, log):
        scratch = tempfile.mkdtemp(prefix="gradmem-commit-")
        try:
            targets = _wheels(repo, commit, build_hook, scratch, log) if build_hook else [_source(repo, commit, scratch, log)]
            command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-deps",
                       "--target", site, *targets]
            code, last = install.run(command, log, timeout_s=envs.PIP_TIMEOUT_S)
            if code != 0:
                raise Unavailable(f"pip could not install {adapter.name} at {commit[:12]} (exit {code}):\n{last}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    return envs.layer(f"{adapter.name}-commit-{commit[:12]}", base, install_commit, dists=(adapter.package,))


def _framework_requirements(adapter):
    """The framework's own runtime requirements as the release installed here declares
    them (pinned by runtime_pins to the versions installed here): a commit near that
    release needs much the same, and its layer is installed with --no-deps. Without
    them PyTensor's commits did not import (no module named 'cons')."""
    found = []
    for dist in adapter.distributions:
        try:
            found += [r for r in importlib.metadata.requires(dist) or [] if "extra ==" not in r]
        except importlib.metadata.PackageNotFoundError:
            pass
    return tuple(found)


def _source(repo, commit, scratch, log):
    archive = os.path.join(scratch, "source.tar")
    code, last = install.run(["git", "-C", repo, "archive", "--format=tar", "-o", archive, commit], log)
    if code != 0:
        raise Unavailable(f"git archive {commit[:12]} failed:\n{last}")
    source = os.path.join(scratch, "source")
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="data")
    return source


def _wheels(repo, commit, hook, scratch, log):
    checkout, wheels = os.path.join(scratch, "checkout"), os.path.join(scratch, "wheels")
    os.makedirs(wheels)
    code, last = install.run(["git", "-C", repo, "worktree", "add", "--detach", checkout, commit], log)
    if code != 0:
        raise Unavailable(f"git worktree add {commit[:12]} failed:\n{last}")
    try:
        env = dict(os.environ, GRADMEM_WHEEL_DIR=wheels, GRADMEM_COMMIT=commit)
        code, last = install.run(["/bin/sh", "-c", hook], log, cwd=checkout, env=env)
        if code != 0:
            raise Unavailable(f"--build-hook failed at {commit[:12]} (exit {code}):\n{last}")
    finally:
        install.run(["git", "-C", repo, "worktree", "remove", "--force", checkout], log)
    found = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    if not found:
        raise Unavailable(f"--build-hook left no wheel in $GRADMEM_WHEEL_DIR at {commit[:12]}")
    return found
