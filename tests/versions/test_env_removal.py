"""A pruned environment is gone whole or not at all, and never while another process
uses it (harness/versions/envs.py: remove)."""

import json
import os
import shutil
import subprocess
import sys

from harness.versions import envs


def _built(tmp_path, monkeypatch, name):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path / "envs"))
    path = envs.env_path(name)
    os.makedirs(os.path.join(path, "lib", "numpy"))
    with open(os.path.join(path, envs.MANIFEST), "w", encoding="utf-8") as handle:
        json.dump({"name": name, "versions": {}}, handle)
    assert envs.cached(name) is not None
    return path


def test_removed_environment_is_not_cached_and_leaves_nothing(tmp_path, monkeypatch):
    path = _built(tmp_path, monkeypatch, "x-1.0")
    assert envs.remove(path)
    assert envs.cached("x-1.0") is None
    assert sorted(os.listdir(envs.cache_root())) == ["x-1.0-" + envs.python_tag() + ".lock", "x-1.0.use"]


def test_a_path_object_is_removed_like_its_string(tmp_path, monkeypatch):
    # `envs.remove(Path.home() / ...)` raised a TypeError from the lock's name (str + ".lock")
    import pathlib

    path = _built(tmp_path, monkeypatch, "x-1.0")
    assert envs.remove(pathlib.Path(path))
    assert envs.cached("x-1.0") is None


def test_a_removal_cut_short_never_leaves_a_manifest_over_a_partial_environment(tmp_path, monkeypatch):
    path = _built(tmp_path, monkeypatch, "x-1.0")

    def cut_short(target, *args, **kwargs):
        # the first file goes, then the process dies (as a restart did mid-rmtree)
        os.rmdir(os.path.join(target, "env", "lib", "numpy"))
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", cut_short)
    try:
        envs.remove(path)
    except KeyboardInterrupt:
        pass
    assert envs.cached("x-1.0") is None  # the next sweep builds it again
    assert not os.path.exists(path)


def test_removing_an_absent_environment_is_quiet(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path / "envs"))
    envs.remove(envs.env_path("never-built"))
    assert envs.cached("never-built") is None


def test_a_layer_made_on_another_base_is_made_again(tmp_path, monkeypatch):
    old_base = envs.Env(_built(tmp_path, monkeypatch, "base-old"), {"versions": {}})
    new_base = envs.Env(_built(tmp_path, monkeypatch, "base-new"), {"versions": {}})
    monkeypatch.setattr(envs, "installed_versions", lambda python, dists, site: {})
    made_on = []

    def install_into(python, site, log):
        os.makedirs(site)
        made_on.append(python)

    first = envs.layer("x-commit-1", old_base, install_into, dists=())
    assert envs.layer("x-commit-1", old_base, install_into, dists=()).path == first.path
    assert made_on == [old_base.python]  # cached on the same base
    again = envs.layer("x-commit-1", new_base, install_into, dists=())
    assert made_on == [old_base.python, new_base.python]
    assert again.manifest["layer_of"] == new_base.path


_HOLDER = """
import sys
from harness.versions import envs
envs._hold(sys.argv[1])  # as for_version does before it looks for the environment
print("held", flush=True)
sys.stdin.read()  # holds it until the test closes this pipe
"""


def test_an_environment_another_process_uses_is_kept_until_it_is_done(tmp_path, monkeypatch):
    # a release sweep and a confirmation of one framework at once: each prunes what it
    # built, and one's prune must not delete the environment the other's workers run in
    path = _built(tmp_path, monkeypatch, "x-1.0")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(envs.__file__))))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, "x-1.0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=root))
    try:
        assert holder.stdout.readline().strip() == "held"
        assert envs.remove(path) is False
        assert envs.cached("x-1.0") is not None
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    assert envs.remove(path) is True  # its user has exited
    assert envs.cached("x-1.0") is None


def test_this_process_removes_what_it_holds(tmp_path, monkeypatch):
    path = _built(tmp_path, monkeypatch, "x-1.0")
    monkeypatch.setattr(envs, "_in_use", {})
    envs._hold("x-1.0")
    assert envs.remove(path)  # its own hold is let go first
    assert envs._in_use == {}
    assert envs.cached("x-1.0") is None


def test_a_batch_prunes_only_the_environments_it_built(tmp_path, monkeypatch):
    """report-change's batch prunes what it built after its last group. An environment
    another process built meanwhile (a `harness run` beside it) is not its own, though
    it was not there when the batch started: it stays (a listing taken at start-up
    pruned it, 2026-12-04)."""
    from harness.upstream import command

    other = _built(tmp_path, monkeypatch, "x-1.0")  # on disk, made by no one in this process
    mine = envs._made_once("x-2.0", lambda scratch, log: {"name": "x-2.0", "versions": {}}).path
    assert envs.cached("x-2.0") is not None
    assert envs.built_here(mine) and not envs.built_here(other)
    command._prune("x", [])
    assert envs.cached("x-2.0") is None
    assert envs.cached("x-1.0") is not None
