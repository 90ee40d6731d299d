"""Environments of one framework share identical files as hard links
(harness/versions/shared_files.py): the same bytes at the same path are stored once, a
file that differs is left alone, only complete siblings are linked from, and deleting
one environment leaves the other whole."""

import os

from harness.versions import envs, shared_files

SAME = b"numpy's bytes " * 1000  # 14 KB, above MIN_BYTES
OTHER = b"another release" * 1000


def _env(root, name, files):
    path = root / name
    for relative, data in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (path / envs.MANIFEST).write_text("{}")
    return path


def test_identical_files_become_one_and_different_ones_stay_two(tmp_path):
    old = _env(tmp_path, "jax-0.9.1-py3.11", {"lib/numpy/core.so": SAME, "lib/jax/api.py": OTHER,
                                               "lib/small.py": b"x" * 100})
    new = _env(tmp_path, "jax-0.9.2-py3.11", {"lib/numpy/core.so": SAME, "lib/jax/api.py": OTHER[::-1],
                                               "lib/small.py": b"x" * 100, "lib/moved/core.so": SAME})
    family = shared_files.siblings(str(tmp_path), "jax-", envs.MANIFEST, str(new))
    assert family == [str(old)]
    linked, saved = shared_files.share(str(new), family)
    # one file: same path and bytes; api.py differs in content, small.py is under MIN_BYTES,
    # and a file at another path is not looked for
    assert (linked, saved) == (1, len(SAME))
    assert os.path.samefile(old / "lib/numpy/core.so", new / "lib/numpy/core.so")
    assert not os.path.samefile(old / "lib/jax/api.py", new / "lib/jax/api.py")
    assert (new / "lib/jax/api.py").read_bytes() == OTHER[::-1]
    assert not any(p.name.endswith(".gradmem-link") for p in new.rglob("*"))  # no temporary left


def test_half_built_or_half_deleted_siblings_are_never_linked_from(tmp_path):
    _env(tmp_path, ".jax-0.9.1-py3.11.partial-abc", {"lib/numpy/core.so": SAME})
    no_manifest = tmp_path / "jax-0.9.0-py3.11"
    (no_manifest / "lib").mkdir(parents=True)
    (tmp_path / "jax-0.9.0-py3.11.lock").write_text("")
    _env(tmp_path, "tensorflow-2.21.0-py3.11", {"lib/numpy/core.so": SAME})  # another framework
    assert shared_files.siblings(str(tmp_path), "jax-", envs.MANIFEST) == []


def test_removing_one_environment_leaves_the_other_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    old = _env(tmp_path, "jax-0.9.1-py3.11", {"lib/numpy/core.so": SAME})
    new = _env(tmp_path, "jax-0.9.2-py3.11", {"lib/numpy/core.so": SAME})
    assert shared_files.share(str(new), [str(old)]) == (1, len(SAME))
    envs.remove(str(old))
    assert not old.exists() and (new / "lib/numpy/core.so").read_bytes() == SAME
