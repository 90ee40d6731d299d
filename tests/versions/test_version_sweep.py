"""`harness run --framework NAME==VERSION`: a pinned version measured in its own
environment (built offline here from .venv/wheelhouse), the record and table saying
which version ran, and the bad inputs: a version not on the index (nearest named, exit
2), a framework without releases, a version pip cannot install (unavailable, pip's last
lines)."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from harness.report import records as report_records

pytestmark = pytest.mark.slow  # acceptance: a pinned version's venv built and installed

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTALLED = importlib.metadata.version("autograd")


def sweep(env, out, frameworks, *extra, workload="rnn_fanout"):
    command = [sys.executable, "-m", "harness", "run", "--workload", workload, "--framework", frameworks,
               "--size", "tiny", "--repeat", "1", "--out", str(out), *extra]
    return subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=1200)


def read(out):
    with open(out, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_pinned_version_runs_in_its_own_environment(offline_env, tmp_path):
    out = tmp_path / "r.jsonl"
    done = sweep(offline_env, out, f"autograd=={INSTALLED},autograd")
    assert done.returncode == 0, done.stderr[-3000:]
    pinned, installed = read(out)
    assert pinned["status"] == "ok" and installed["status"] == "ok", (pinned["message"], installed["message"])
    assert (pinned["version"], pinned["framework_version"]) == (INSTALLED, INSTALLED)
    assert (installed["version"], installed["framework_version"]) == (None, INSTALLED)
    env_dir = pinned["provenance"]["framework_env"]
    assert env_dir.startswith(offline_env["GRADMEM_ENV_DIR"]) and os.path.basename(env_dir).startswith(f"autograd-{INSTALLED}-py")
    assert {"autograd", "numpy", "scipy", "gradmem"} <= set(pinned["provenance"]["versions"])
    assert "framework_env" not in installed["provenance"]
    # the same code measured both (this checkout's commit), and the same math: tiny rnn_fanout's
    # figures are under the RSS grain, so only the gradient check is compared
    assert pinned["provenance"]["git_commit"] == installed["provenance"]["git_commit"]
    assert pinned["grad_rel_err"] is not None and pinned["grad_rel_err"] < 1e-5
    header = next(line for line in done.stdout.splitlines() if line.startswith("workload"))
    assert header.split()[:3] == ["workload", "framework", "version"]
    columns = next(iter(report_records.views(read(out)).values()))["columns"]
    assert columns == [f"autograd=={INSTALLED}", f"autograd=={INSTALLED} (installed)"]


def test_uninstallable_version_is_unavailable_with_pips_lines(offline_env, tmp_path):
    listing = tmp_path / "index.json"
    listing.write_text(json.dumps({"autograd": ["1.7.0", INSTALLED]}))
    env = dict(offline_env, GRADMEM_INDEX_VERSIONS=str(listing))  # 1.7.0 "exists" but has no wheel here
    out = tmp_path / "r.jsonl"
    done = sweep(env, out, "autograd==1.7.0")
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = read(out)
    assert record["status"] == "unavailable" and record["version"] == "1.7.0"
    assert "pip install autograd==1.7.0" in record["message"]
    assert "No matching distribution found for autograd==1.7.0" in record["message"]  # pip's own last lines
    leftovers = [
        n for n in os.listdir(offline_env["GRADMEM_ENV_DIR"])
        if n.startswith((".autograd-1.7.0", "autograd-1.7.0-py")) and not n.endswith(".lock")  # the lock file stays
    ]
    assert leftovers == []  # the half-built environment was removed


def test_bad_versions_are_refused_before_running(offline_env, tmp_path):
    listing = tmp_path / "index.json"
    listing.write_text(json.dumps({"autograd": ["1.6.2", "1.7.0", "1.8.0", "1.9.0", "1.9.1"]}))
    env = dict(offline_env, GRADMEM_INDEX_VERSIONS=str(listing))
    out = tmp_path / "r.jsonl"
    done = sweep(env, out, "autograd==1.8.5")
    assert done.returncode == 2
    assert "autograd 1.8.5 does not exist on the package index; nearest released versions of autograd: 1.7.0, 1.8.0, 1.9.0, 1.9.1" in done.stderr
    done = sweep(env, out, "reference==0.1.0")
    assert done.returncode == 2 and "reference has no releases to pin" in done.stderr
    done = sweep(env, out, "autograd>=1.8")
    assert done.returncode == 2 and "only an exact version is accepted" in done.stderr
    assert not out.exists()
