"""A source linked to a sibling environment's file gets valid bytecode again
(harness/versions/bytecode.py), in a new environment and in one built before that step.

Why it matters: jax 0.5.2's environment linked to 0.5.1's held ~1,650 stale .pyc files,
so each worker compiled those modules at import, and compiled tiny_nerf read 7.7 MiB
retained where valid bytecode reads 9.4 (docs/releases.md, "Stale bytecode").
"""

import importlib.util
import json
import os
import py_compile
import subprocess
import sys

from harness.versions import bytecode, envs, shared_files

SOURCE = "VALUE = 1\n" + "# the same bytes in both releases\n" * 200  # above shared_files.MIN_BYTES


def stale(source):
    """True when `source`'s .pyc is missing or records another modification time or
    size than `source` has (a timestamp-checked .pyc Python would not use)."""
    try:
        with open(importlib.util.cache_from_source(source), "rb") as handle:
            header = handle.read(16)
    except FileNotFoundError:
        return True
    if int.from_bytes(header[4:8], "little") & 1:  # hash-based: checked against the bytes, not the time
        return False
    status = os.stat(source)
    return (int.from_bytes(header[8:12], "little") != int(status.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(header[12:16], "little") != status.st_size & 0xFFFFFFFF)


def _env(root, name, mtime):
    """An environment holding one module, compiled at install as pip does, with the
    install's own modification time."""
    path = root / name
    module = path / "lib" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text(SOURCE)
    os.utime(module, (mtime, mtime))
    py_compile.compile(str(module), doraise=True)
    (path / envs.MANIFEST).write_text(json.dumps({"name": name, "versions": {}}))
    return path, str(module)


def test_linking_makes_bytecode_stale_and_refresh_makes_it_valid(tmp_path):
    old, _ = _env(tmp_path, "jax-0.5.1-py3.11", mtime=1_700_000_000)
    new, module = _env(tmp_path, "jax-0.5.2-py3.11", mtime=1_700_000_600)  # installed ten minutes later
    assert not stale(module)
    assert shared_files.share(str(new), [str(old)]) == (1, len(SOURCE))
    # the link carries 0.5.1's modification time; the .pyc pip wrote records 0.5.2's
    assert stale(module)
    subprocess.run(bytecode.command(sys.executable, str(new)), check=True)
    assert not stale(module)
    assert not stale(str(old / "lib" / "mod.py"))  # the sibling's own stays valid


def _built_before_the_step(tmp_path, monkeypatch, sibling, name):
    """Environment `name` in the cache as the code before bytecode.py left it: a source
    linked to `sibling`'s, its .pyc stale, a manifest without ``bytecode``; its module."""
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    old, _ = _env(tmp_path, f"{sibling}-{envs.python_tag()}", mtime=1_700_000_000)
    new, module = _env(tmp_path, f"{name}-{envs.python_tag()}", mtime=1_700_000_600)
    shared_files.share(str(new), [str(old)])
    (new / envs.MANIFEST).write_text(json.dumps({"name": name, "versions": {}, "shared_files": 1,
                                                 "python_path": sys.executable}))
    assert stale(module)
    return new, module


def test_an_environment_built_before_the_step_is_refreshed_once_when_taken(tmp_path, monkeypatch):
    new, module = _built_before_the_step(tmp_path, monkeypatch, "jax-0.5.1", "jax-0.5.2")

    found = envs._with_valid_bytecode(envs.cached("jax-0.5.2"), "jax-0.5.2")
    assert not stale(module)
    assert found.manifest["bytecode"] == bytecode.RULE
    assert json.loads((new / envs.MANIFEST).read_text())["bytecode"] == bytecode.RULE  # once: the manifest says so


def test_a_missing_pyc_is_stale_and_a_hash_based_one_is_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(SOURCE)
    assert stale(str(module))
    py_compile.compile(str(module), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    os.utime(module, (1, 1))
    assert not stale(str(module))


def test_build_refreshes_a_cached_environment_built_before_the_step(tmp_path, monkeypatch):
    # commit bases (versions/commits.py) come back through build's cache, not for_version
    new, module = _built_before_the_step(tmp_path, monkeypatch, "pytensor-base-a", "pytensor-base-b")
    found = envs.build("pytensor-base-b", ["never-installed==0"])  # cached: nothing is installed
    assert found.path == str(new) and found.manifest["bytecode"] == bytecode.RULE
    assert not stale(module)
