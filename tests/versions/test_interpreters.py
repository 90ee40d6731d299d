"""A release the running Python cannot install is built with another Python of the host:
pip's refusal is read for the release's Requires-Python, the oldest admitting
interpreter is chosen (never the running one's minor version), and the environment,
named for that Python, is found again by name."""

import json
import os
import stat
import sys

import pytest

from harness.versions import envs, interpreters

PIP_REFUSAL = (
    "INFO: pip is looking at multiple versions...\n"
    "ERROR: Ignored the following versions that require a different python version: "
    "0.10.0 Requires-Python >=3.11; 0.11.0 Requires-Python >=3.12; 0.12.0 Requires-Python >=3.12\n"
    "ERROR: No matching distribution found for jax==0.11.0\n"
)


def _fake_python(folder, name, version):
    """An executable that answers the version question as a Python of `version` would."""
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        handle.write(f"#!/bin/sh\necho {' '.join(version.split('.'))}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_pip_refusal_names_the_release_requires_python():
    assert interpreters.needs_other_python(PIP_REFUSAL, "0.11.0") == ">=3.12"
    assert interpreters.needs_other_python(PIP_REFUSAL, "0.10.0") == ">=3.11"  # the first of pip's list too
    assert interpreters.needs_other_python(PIP_REFUSAL, "0.9.2") is None  # refused for another reason
    assert interpreters.needs_other_python("ERROR: No matching distribution found", "0.11.0") is None


def test_below_the_running_python_the_nearest_is_chosen(tmp_path, monkeypatch):
    """`--python '<3.11'` on a 3.11 host with pyenv's 3.6-3.10: 3.10, not the oldest."""
    major, minor = sys.version_info[:2]
    paths = [_fake_python(tmp_path, f"py{m}", f"{major}.{m}.1") for m in (minor - 5, minor - 1, minor - 3)]
    monkeypatch.setenv("GRADMEM_PYTHONS", os.pathsep.join(paths))
    assert interpreters.find(f"<{major}.{minor}")[0] == (paths[1], f"{major}.{minor - 1}.1")


def test_the_oldest_admitting_python_is_chosen(tmp_path, monkeypatch):
    newer = _fake_python(tmp_path, "py99", "3.99.1")
    older = _fake_python(tmp_path, "py98", "3.98.0")
    same = _fake_python(tmp_path, "same", f"{sys.version_info.major}.{sys.version_info.minor}.0")
    broken = os.path.join(tmp_path, "missing-python")  # a pyenv shim without its Python: skipped
    monkeypatch.setenv("GRADMEM_PYTHONS", os.pathsep.join([newer, older, same, broken]))
    found, looked = interpreters.find(">=3.98")
    assert found == (older, "3.98.0")
    assert {"3.99.1", "3.98.0"} <= set(looked)
    assert interpreters.find(">=4.0")[0] is None
    # the running minor version is never "another Python", even where it is admitted
    assert interpreters.find(f"=={sys.version_info.major}.{sys.version_info.minor}.*")[0] != (same, f"{sys.version_info.major}.{sys.version_info.minor}.0")


def test_an_environment_of_another_python_is_found_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    other = tmp_path / "jax-0.11.0-py3.99"
    other.mkdir()
    (other / envs.MANIFEST).write_text(json.dumps({"python": "3.99.1", "versions": {"jax": "0.11.0"}}))
    (tmp_path / "jax-0.11.0.1-py3.99").mkdir()  # a longer version is another release, never matched
    found = envs.cached("jax-0.11.0")
    assert found is not None and found.path == str(other) and found.versions == {"jax": "0.11.0"}
    assert envs.cached("jax-0.11") is None
    assert envs.python_tag("3.12.1") == "py3.12"


def test_gradmem_installs_into_an_environment_of_an_older_python(tmp_path, monkeypatch):
    # torch 1.12.1 has wheels for Python <= 3.10 only; gradmem's own Requires-Python
    # (>=3.11) must not refuse that environment (workers run this checkout's code)
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path / "envs"))
    steps = []
    monkeypatch.setattr(envs, "_step", lambda command, log, what: steps.append(command))
    monkeypatch.setattr(envs, "gradmem_wheel", lambda log: "gradmem-0.1.0-py3-none-any.whl")
    monkeypatch.setattr(envs, "_run_python", lambda python, script, *args, **kw: "3.10.13\n")
    monkeypatch.setattr(envs, "installed_versions", lambda python, dists, first=None: {"torch": "1.12.1"})
    envs.build("torch-1.12.1", ["torch==1.12.1"])
    gradmem = [command for command in steps if command[-1] == "gradmem-0.1.0-py3-none-any.whl"]
    assert len(gradmem) == 1
    assert "--no-deps" in gradmem[0] and "--ignore-requires-python" in gradmem[0]


def test_a_long_refusal_list_keeps_the_release_asked_for(tmp_path):
    # pip's list of the releases it refused for their Requires-Python runs past the
    # 400 characters the last lines keep of a line; the release asked for sat in the cut
    # middle (PyTensor 3.2.0 among 3.1.1-3.3.8), so no other Python was tried for it
    from harness.frameworks.base import Unavailable
    from harness.versions import envs, install

    releases = [f"3.{minor}.{patch}" for minor in (1, 2, 3) for patch in range(9)]
    refusal = ("ERROR: Ignored the following versions that require a different python version: "
               + "; ".join(f"{v} Requires-Python <3.15,>=3.12" for v in releases))
    script = tmp_path / "pip.sh"
    script.write_text(f"echo '{refusal}'\necho 'ERROR: No matching distribution found for pytensor==3.2.0'\nexit 1\n")
    assert len(refusal) > install.LINE_CHARS
    with pytest.raises(Unavailable) as caught:
        envs._step(["sh", str(script)], str(tmp_path / "install.log"), "pip install pytensor==3.2.0")
    assert interpreters.needs_other_python(install.last_lines(refusal), "3.2.0") is None  # what the cut line loses
    assert interpreters.needs_other_python(str(caught.value), "3.2.0") == "<3.15,>=3.12"


def test_a_required_python_passes_over_the_running_ones_environment(tmp_path, monkeypatch):
    """`harness releases --python '<3.11'` (torch 2.0's torch.compile refuses 3.11, which
    its wheels support): an environment of the running Python is not taken, one of an
    admitted Python is."""
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    monkeypatch.setattr(envs, "_required_python", None)  # restored after the test
    running = ".".join(map(str, sys.version_info[:3]))
    for python in (running, "3.99.1"):
        folder = tmp_path / f"torch-2.0.1-{envs.python_tag(python)}"
        folder.mkdir()
        (folder / envs.MANIFEST).write_text(json.dumps({"python": python, "versions": {"torch": "2.0.1"}}))
    assert envs.cached("torch-2.0.1").manifest["python"] == running  # by default the running Python's
    envs.require_python("==3.99.*")
    assert envs.cached("torch-2.0.1").manifest["python"] == "3.99.1"
    envs.require_python("==3.98.*")
    assert envs.cached("torch-2.0.1") is None  # neither admitted: it is built


def test_a_required_python_builds_with_the_python_it_admits(tmp_path, monkeypatch):
    from harness import frameworks

    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    monkeypatch.setattr(envs, "_required_python", None)
    asked, built = [], []
    monkeypatch.setattr(interpreters, "find", lambda spec: (asked.append(spec), (("/py3.99/bin/python", "3.99.1"), []))[1])
    monkeypatch.setattr(envs, "build_loading", lambda *a, python=None: built.append(python) or "env")
    envs.require_python("==3.99.*")
    assert envs._found_or_built(frameworks.get("autograd"), "1.7.0", None, ">=3.8") == "env"
    # both the release's own Requires-Python and the required one hold (a comma is "and")
    assert asked == [">=3.8,==3.99.*"] and built == ["/py3.99/bin/python"]
