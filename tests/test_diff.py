"""`python -m harness diff` end to end on tiny records: exit codes, what it says, and
that it names the gradient accumulation on the planted autograd regression
(tools/bisect_demo.py's plant, applied to a copy of this tree's harness package)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from harness import results
from harness.diff import compare

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = [sys.executable, "-m", "harness"]
QUICK = ["--size", "tiny", "--repeat", "1", "--time-budget", "0", "--quiet"]


def harness(*args, cwd=None, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(HARNESS + [str(a) for a in args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """rnn_fanout at tiny, measured by the reference engine and torch."""
    out = tmp_path_factory.mktemp("diff") / "grid.jsonl"
    proc = harness("run", "--workload", "rnn_fanout", "--framework", "reference,torch", *QUICK, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in results.read_records(out)] == ["ok", "ok"]
    return out


def test_two_cells_of_one_file_side_by_side(grid):
    proc = harness("diff", grid, "--a", "framework=reference", "--b", "framework=torch")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for heading in ("step peak", "retained", "code pages", "host RSS retained", "footprint", "first-step peak", "time",
                    "Step peak difference by category", "not explained by a counted category",
                    "Saved activations by op", "Environment differences that can move memory",
                    "Which layer changed"):
        assert heading in text, heading
    assert "versions.torch" in text  # the environment difference a reader must see
    assert "TanhBackward0" in text and "tanh" in text  # the lists line up under the op set's name


def test_json_splits_the_step_peak_without_forcing_the_rest_to_zero(grid):
    proc = harness("diff", grid, "--a", "framework=reference", "--b", "framework=torch", "--json")
    assert proc.returncode == 0, proc.stderr
    diff = json.loads(proc.stdout)
    e = diff["explained"]
    counted = sum(c["diff"] for c in e["categories"] if c["diff"] is not None)
    # the rest is exactly what the categories leave, whatever its sign
    assert e["unexplained"]["diff"] == e["step_peak"]["diff"] - counted
    ops = {row["op"]: row for row in diff["saved_by_op"]["rows"]}
    # both save h_1 .. h_n: the same op, the same bytes, no difference
    assert ops["tanh"]["a"] == ops["tanh"]["b"] > 0 and ops["tanh"]["diff"] == 0


def test_two_files_and_the_bad_selectors(grid, tmp_path):
    other = tmp_path / "torch.jsonl"
    other.write_text("".join(line for line in grid.read_text().splitlines(True) if '"torch"' in line))
    assert harness("diff", grid, other, "--a", "framework=reference").returncode == 0  # B's file has one record

    proc = harness("diff", grid, "--a", "framework=mlx", "--b", "framework=torch")
    assert proc.returncode == 2
    assert "no record" in proc.stderr and "framework=reference|torch" in proc.stderr

    proc = harness("diff", grid, "--a", "workload=rnn_fanout", "--b", "framework=torch")
    assert proc.returncode == 2
    assert "2 records" in proc.stderr and "framework=reference|torch" in proc.stderr

    proc = harness("diff", grid, "--a", "frame=torch", "--b", "framework=torch")
    assert proc.returncode == 2 and "unknown selector key 'frame'" in proc.stderr and "framework" in proc.stderr

    proc = harness("diff", grid, "--a", "framework=torch")
    assert proc.returncode == 2 and "give --a and --b" in proc.stderr

    proc = harness("diff", tmp_path / "missing.jsonl", grid)
    assert proc.returncode == 2 and "no such result file" in proc.stderr


def _planted_copy(dest):
    """This tree's harness package with tools/bisect_demo.py's plant applied."""
    spec = importlib.util.spec_from_file_location("bisect_demo", os.path.join(PROJECT, "tools", "bisect_demo.py"))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    shutil.copytree(os.path.join(PROJECT, "harness"), dest / "harness")
    path = dest / demo.ENGINE_FILE
    text = path.read_text()
    for old, new in demo.PLANTS.values():
        assert old in text, "the plant no longer applies: update tools/bisect_demo.py"
        text = text.replace(old, new)
    path.write_text(text)


def test_the_planted_regression_shows_up_as_gradient_accumulation(tmp_path):
    planted = tmp_path / "planted"
    _planted_copy(planted)
    base, bad = tmp_path / "base.jsonl", tmp_path / "planted.jsonl"
    # run from tmp_path: a worker started as `python -m` puts its cwd first on sys.path
    for out, path in ((base, PROJECT), (bad, str(planted))):
        proc = harness("run", "--workload", "rnn_fanout", "--framework", "reference", *QUICK, "--out", out,
                       cwd=tmp_path, pythonpath=path)
        assert proc.returncode == 0, proc.stderr
    proc = harness("diff", base, bad, "--json")
    assert proc.returncode == 0, proc.stderr
    roles = json.loads(proc.stdout)["backward"]
    # the plant makes a fresh sum for every fan-in arrival at W (n of them): the
    # accumulation allocates where the in-place one allocated nothing, and at the
    # backward's highest point a W-sized running sum (D x D float32) is live beside
    # the cotangents
    assert roles["allocated"]["grew_most"] == "gradient accumulation"
    assert roles["at_peak"]["grew_most"] == "gradient accumulation"
    accumulation = {r["figure"]: r for r in roles["at_peak"]["rows"]}["gradient accumulation"]
    assert accumulation["a"] == 0 and accumulation["b"] >= 16 * 16 * 4
    text = harness("diff", base, bad).stdout
    assert "grew most: gradient accumulation" in text


def _record(peak, retained, predicted):
    prediction = {"state": "predicted", "method": "xla memory_analysis", "bytes": predicted,
                  "compares_with": "peak_bytes.total", "fields": {}, "reason": None}
    return {"peak_bytes": {"total": peak}, "retained_bytes": retained,
            "retained_detail_bytes": {"anon": retained, "file": 0, "shmem": 0}, "prediction": prediction}


def test_which_layer_changed():
    mib = 1 << 20
    assert compare.layer(_record(50 * mib, mib, 40 * mib), _record(70 * mib, mib, 60 * mib))["plan"]
    runtime = compare.layer(_record(50 * mib, mib, 40 * mib), _record(70 * mib, mib, 40 * mib))
    assert runtime["runtime"] and not runtime["plan"] and runtime["verdict"].startswith("runtime changed")
    kept = compare.layer(_record(50 * mib, mib, 40 * mib), _record(50 * mib, 50 * mib, 40 * mib))
    assert kept["kept"] and not kept["runtime"] and "kept-between-steps changed" in kept["verdict"]
    assert compare.layer(_record(50 * mib, mib, 40 * mib), {"peak_bytes": {"total": 1}})["verdict"] is None
    failed = dict(_record(1, 1, None), prediction={"state": "failed", "reason": "no backend", "bytes": None})
    assert "failed" in compare.layer(failed, _record(1, 1, 1))["reason"]
