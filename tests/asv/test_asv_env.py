"""The `installed` environment (harness/asv_env.py) and the migration of old result sets
(tools/asv_rename_env.py): names and keys come from versions, never from a path."""

import json
import os
import subprocess
import sys

import asv_helpers as h


def environment(tmp, python, requirements):
    from asv.config import Config

    from harness.asv_env import InstalledEnvironment

    return InstalledEnvironment(Config.load(str(h.write_config(tmp, h.PROJECT))), python, requirements, {})


def test_two_paths_to_one_interpreter_get_one_name_and_the_installed_versions(tmp_path):
    from importlib.metadata import PackageNotFoundError, version

    from harness.asv_env import env_name, framework_pins

    link = tmp_path / "elsewhere"
    os.symlink(os.path.dirname(os.path.dirname(h.PYTHON)), link)  # the venv under another path
    wanted = {"numpy": "0.0.1", "no-such-package-gradmem": "1.0"}  # the matrix's pins are not copied
    here = environment(tmp_path, h.PYTHON, wanted)
    there = environment(tmp_path, str(link / "bin" / "python"), wanted)
    # Named by what is installed of the matrix's packages and the framework extras' pins
    # (added from pyproject.toml); a package not installed is left out.
    expected = {}
    for name in ["numpy", *framework_pins()]:
        try:
            expected[name] = version(name)
        except PackageNotFoundError:
            pass
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert here.name == there.name == env_name(python, expected)
    assert here.python == python
    assert here.requirements == expected and here.requirements["numpy"] == version("numpy")
    assert "torch" in framework_pins() and "no-such-package-gradmem" not in here.requirements


def test_a_built_environment_gets_every_framework_extra_pinned_and_named(tmp_path):
    """asv's own virtualenv (`virtualenv-pinned`, what `asv find` builds) installs the
    framework extras' pins with the matrix's, and says them in its name."""
    from asv.config import Config

    from harness.asv_env import PinnedVirtualenv, framework_pins

    conf = Config.load(str(h.write_config(tmp_path, h.PROJECT)))
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = PinnedVirtualenv(conf, python, {"numpy": "2.4.6"}, {})
    assert env.requirements == {**{d: v[0] for d, v in framework_pins().items()}, "numpy": "2.4.6"}
    assert env.name.startswith(f"virtualenv-pinned-py{python}-") and f"-torch{framework_pins()['torch'][0]}" in env.name


def test_rename_moves_an_existing_env_result_set_without_touching_figures(tmp_path):
    committed = h.committed_result_files()[0]
    data = json.loads(committed.read_text())
    # The same figures as asv's `existing` environment stored them before the migration.
    old_name = "existing-py_tmp_gradmem-asv-venv_bin_python"
    old = dict(data, env_name=old_name, python="/tmp/gradmem-asv-venv/bin/python", requirements={},
               params={**{k: v for k, v in data["params"].items() if k not in data["requirements"]},
                       "python": "/tmp/gradmem-asv-venv/bin/python"})
    results = tmp_path / "results" / "m1"
    results.mkdir(parents=True)
    (results / "machine.json").write_text(json.dumps({"machine": "m1", "version": 1}))
    (results / f"{data['commit_hash'][:8]}-{old_name}.json").write_text(json.dumps(old))
    config = h.write_config(tmp_path, h.PROJECT)
    done = subprocess.run([h.PYTHON, str(h.PROJECT / "tools" / "asv_rename_env.py"), "--config", str(config),
                           "--machine", "m1", "--from", old_name, "--to-installed", h.PYTHON],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    [moved] = [p for p in results.glob("*.json") if p.name != "machine.json"]
    new = json.loads(moved.read_text())
    assert moved.name == h.result_file_name(data["commit_hash"], h.installed_env_name())
    assert json.dumps(new["results"]) == json.dumps(old["results"]) and new["commit_hash"] == old["commit_hash"]
    assert new["params"]["python"] == new["python"] and "/" not in new["env_name"]
    again = subprocess.run([h.PYTHON, str(h.PROJECT / "tools" / "asv_rename_env.py"), "--config", str(config),
                            "--machine", "m1", "--from", old_name, "--to-installed", h.PYTHON],
                           capture_output=True, text=True)
    assert again.returncode == 2 and "no results of environment" in again.stderr
