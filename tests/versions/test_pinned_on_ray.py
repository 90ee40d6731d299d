"""A pinned version (F==VERSION) on a Ray cluster: the node builds the version's
environment in its own cache and the pass runs in it (harness/sweep/node_pass.py);
the record names that environment and its versions. Before, such a cell was
`unavailable` on Ray ("environments are built on the driver's machine").

One node started here with a cache of its own (GRADMEM_ENV_DIR in the node's
environment, not the driver's), pip offline from .venv/wheelhouse in both."""

import importlib.metadata
import os
import subprocess
import sys

import pytest

from harness import results

pytestmark = pytest.mark.slow  # acceptance: a Ray cluster and two venv builds

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INSTALLED = importlib.metadata.version("autograd")


@pytest.fixture
def node_cache(offline_env, tmp_path, monkeypatch):
    """A one-node cluster whose processes see pip offline and their own env cache."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cache = tmp_path / "node-envs"
    for key in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_DISABLE_PIP_VERSION_CHECK"):
        monkeypatch.setenv(key, offline_env[key])
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(cache))  # the node's; the driver's is offline_env's
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    node = {"num_cpus": 1, "resources": {"gradmem_node": 1}, "object_store_memory": 100 * 1024**2}
    cluster = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    try:
        cluster.wait_for_nodes()
        yield cluster.address, cache
    finally:
        cluster.shutdown()


def test_a_pinned_version_runs_on_a_ray_node_in_the_environment_that_node_built(offline_env, node_cache, tmp_path):
    address, cache = node_cache
    out = tmp_path / "r.jsonl"
    command = [sys.executable, "-m", "harness", "run", "--workload", "chained_dot", "--framework",
               f"autograd=={INSTALLED}", "--size", "tiny", "--repeat", "1", "--time-budget", "0", "--warmup", "0",
               "--executor", "ray", "--address", address, "--out", str(out), "--quiet"]
    done = subprocess.run(command, cwd=PROJECT, env=offline_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = results.read_records(str(out))
    assert record["status"] == "ok", record["message"]
    assert record["version"] == INSTALLED
    node_env = record["provenance"]["node"]["framework_env"]
    # built by the node, in the node's cache, not the driver's
    assert node_env["path"].startswith(str(cache)), node_env
    assert node_env["versions"]["autograd"] == INSTALLED
    assert record["provenance"]["framework_env"].startswith(offline_env["GRADMEM_ENV_DIR"])
    assert record["peak_bytes"]["total"] > 0
