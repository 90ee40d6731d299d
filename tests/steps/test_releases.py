"""A native torch step across two torch releases: `harness releases` and `harness bisect`
measure it in each release's environment, in its own row only.

Torch releases come from PyPI as CUDA builds (about 2.7 GB each: the PyTorch CPU index
was not reachable where this was written), so the test never downloads them: it runs
on the environments `--torch-index pypi` left in ~/.cache/gradmem/envs and is skipped,
saying so, where they are not there. The package index is replaced by a file
(GRADMEM_INDEX_VERSIONS), so nothing is asked of the network.
"""

import json
import os
import subprocess
import sys

import pytest

from harness import results
from harness.versions import envs

pytestmark = pytest.mark.slow  # acceptance: two pinned torch environments, a memory pass each

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP_SGD = os.path.join(ROOT, "examples", "steps", "mlp_sgd.py")
RELEASES = ("2.0.1", "2.1.0")


@pytest.fixture
def offline_index(tmp_path):
    missing = [v for v in RELEASES if envs.cached(f"torch-{v}") is None]
    if missing:
        pytest.skip(f"no cached environment of torch {', '.join(missing)} (this test downloads nothing; build them "
                    f"with harness releases --framework torch --from 2.0.1 --to 2.1.0 --torch-index pypi --keep-envs)")
    versions = tmp_path / "index.json"
    versions.write_text(json.dumps({"torch": list(RELEASES)}))
    return dict(os.environ, GRADMEM_INDEX_VERSIONS=str(versions))


def test_releases_measures_a_native_step_on_both_releases(tmp_path, offline_index):
    out = tmp_path / "rel"
    done = subprocess.run([sys.executable, "-m", "harness", "releases", "--workload", MLP_SGD, "--framework", "torch",
                           "--from", RELEASES[0], "--to", RELEASES[1], "--torch-index", "pypi", "--size", "tiny",
                           "--repeats", "1", "--keep-envs", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=offline_index, timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    records = results.read_records(out / "torch.jsonl")
    # one cell per release: eager only (the adapter's compiled mode is not a native step's)
    assert sorted((r["framework_version"], r["mode"], r["status"]) for r in records) == [
        (v, "eager", "ok") for v in RELEASES]
    for record in records:
        assert record["step_kind"] == "native" and record["provenance"]["framework_env"] == envs.cached(
            f"torch-{record['version']}").path
        # the template's tiny MLP keeps relu's output and the output for the backward in
        # every release: B (H + D) float32 = 4 (16 + 8) x 4 bytes, its bound
        assert record["breakdown_bytes"]["saved_activations"] == record["bound_bytes"] == 384


def test_bisect_takes_a_native_step(offline_index):
    done = subprocess.run([sys.executable, "-m", "harness", "bisect", "--workload", MLP_SGD, "--framework", "torch",
                           "--good", RELEASES[0], "--bad", RELEASES[1], "--torch-index", "pypi", "--size", "tiny",
                           "--metric", "retained"],
                          capture_output=True, text=True, cwd=ROOT, env=offline_index, timeout=1200)
    # exit 1: good and bad do not differ beyond the threshold (0 would name a culprit);
    # either way both releases were measured
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "torch==2.0.1" in done.stdout and "torch==2.1.0" in done.stdout and " MiB" in done.stdout
