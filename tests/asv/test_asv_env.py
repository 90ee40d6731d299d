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
    from importlib.metadata import version

    link = tmp_path / "elsewhere"
    os.symlink(os.path.dirname(os.path.dirname(h.PYTHON)), link)  # the venv under another path
    wanted = {"numpy": "0.0.1", "no-such-package-gradmem": "1.0"}  # the matrix's pins are not copied
    here = environment(tmp_path, h.PYTHON, wanted)
    there = environment(tmp_path, str(link / "bin" / "python"), wanted)
    assert here.name == there.name == f"py{sys.version_info[0]}.{sys.version_info[1]}-numpy{version('numpy')}"
    assert here.python == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert here.requirements == {"numpy": version("numpy")}  # installed, not the pin; missing left out


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
