"""Workloads from outside the package: a .py file or module:attr (harness/workloads/loader.py)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from harness import workloads
from harness.choices import ChoiceError
from harness.workloads import loader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A user's workload, written outside the repository: two tanh layers, no bound_bytes
# (so the bound is derived), one segment.
MLP = textwrap.dedent('''
    SIZES = {"tiny": {"D": 8, "B": 4}, "small": {"D": 32, "B": 16}, "paper": {"D": 64, "B": 32}}
    BATCH_AXIS = "B"
    SEGMENTS = "the second layer, one checkpoint"

    def init(rng, cfg, dtype):
        D, B = cfg["D"], cfg["B"]
        w = lambda: (rng.standard_normal((D, D)) / D ** 0.5).astype(dtype)
        return {"w1": w(), "w2": w()}, {"x": rng.standard_normal((B, D)).astype(dtype)}

    def loss(ops, params, inputs, cfg):
        h = ops.tanh(ops.matmul(inputs["x"], params["w1"]))
        h = ops.checkpoint(lambda h, w: ops.tanh(ops.matmul(h, w)), h, params["w2"])
        return ops.sum(h)
''')


@pytest.fixture
def mlp_file(tmp_path):
    path = tmp_path / "my_mlp.py"
    path.write_text(MLP)
    return path


def test_a_file_resolves_to_its_path_and_content_hash(mlp_file):
    ref = workloads.resolve(str(mlp_file))
    path, _, digest = ref.partition(loader.HASH_MARK)
    assert path == str(mlp_file) and len(digest) == loader.HASH_CHARS
    problem = workloads.build(ref, "tiny", "float32")
    assert problem.batch == 4 and problem.bound_source == "derived"
    # derived: the ledger's saved activations at the end of forward. tanh's VJP reads
    # its output, so h1 (also w2's matmul input) and h2 are kept; the matmul outputs are
    # not (x and w1, w2 are the caller's): two (B, D) = (4, 8) float32 arrays.
    assert problem.bound_bytes == 2 * 4 * 8 * 4
    assert workloads.with_segments([ref]) == (ref,)


def test_an_edited_file_is_refused_under_its_old_hash(mlp_file):
    ref = workloads.resolve(str(mlp_file))
    mlp_file.write_text(MLP + "\n# edited\n")
    loader._cache.clear()
    with pytest.raises(ChoiceError, match="changed"):
        workloads.get(ref)
    assert workloads.resolve(str(mlp_file)) != ref  # a new version is a new name


@pytest.mark.parametrize(
    "source, missing",
    [
        ('SIZES = {"tiny": {}}\n', ["BATCH_AXIS is missing", "init is missing", "loss is missing", "SIZES lacks small, paper"]),
        (MLP.replace('BATCH_AXIS = "B"', 'BATCH_AXIS = "N"'), ["SIZES['tiny'] has no key 'N'"]),
        (MLP + "\nloss = 3\n", ["loss must be a function"]),
        ("import no_such_module_here\n", ["failed to import: ModuleNotFoundError"]),
    ],
)
def test_a_broken_module_is_named_with_what_it_lacks(tmp_path, source, missing):
    path = tmp_path / "broken.py"
    path.write_text(source)
    with pytest.raises(ChoiceError) as info:
        workloads.parse(f"chained_dot,{path}")
    for piece in missing:
        assert piece in str(info.value)


def test_module_attr_and_its_errors():
    assert workloads.resolve("harness.workloads.chained_dot:") == "harness.workloads.chained_dot:"
    assert workloads.get("harness.workloads.chained_dot:").BATCH_AXIS == "cols"
    with pytest.raises(ChoiceError, match="has no attribute 'nope'"):
        workloads.resolve("harness.workloads.chained_dot:nope")
    with pytest.raises(ChoiceError, match="cannot import module"):
        workloads.resolve("no_such_pkg_xyz:thing")
    with pytest.raises(ChoiceError, match="does not exist"):
        workloads.resolve("missing_file.py")
    with pytest.raises(ChoiceError, match="valid workloads: chained_dot"):
        workloads.resolve("chained_dott")


def _harness(*args, cwd):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)


@pytest.mark.slow  # acceptance: real run/check/scale of a user's file
def test_run_measures_a_file_from_outside_the_repository(mlp_file, tmp_path):
    out = tmp_path / "r.jsonl"
    proc = _harness("run", "--workload", str(mlp_file), "--framework", "reference", "--size", "tiny",
                    "--repeat", "1", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "ok", record.get("message")
    assert record["workload"] == workloads.resolve(str(mlp_file))
    assert record["bound_source"] == "derived" and record["bound_bytes"] == 256
    # a broken file: exit 2, the missing piece named, no record
    (tmp_path / "bad.py").write_text('SIZES = {"tiny": {}, "small": {}, "paper": {}}\nBATCH_AXIS = "B"\n')
    proc = _harness("run", "--workload", "bad.py", "--framework", "reference", "--size", "tiny",
                    "--out", str(tmp_path / "b.jsonl"), cwd=tmp_path)
    assert proc.returncode == 2 and "init is missing; loss is missing" in proc.stderr
    assert not (tmp_path / "b.jsonl").exists()


@pytest.mark.slow  # acceptance: real run/check/scale of a user's file
def test_the_template_runs_as_written(tmp_path):
    proc = _harness("new-workload", "my_model", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    problem = workloads.build(workloads.resolve(str(tmp_path / "my_model.py")), "tiny", "float32")
    # its commented bound_bytes: relu's output (B, H) and y (B, D), float32, B=4 H=16 D=8
    assert (problem.bound_source, problem.bound_bytes) == ("derived", 4 * (16 + 8) * 4)
    assert _harness("new-workload", "my_model", cwd=tmp_path).returncode == 2  # exists: no overwrite
    proc = _harness("check", "--workload", "my_model.py", "--framework", "torch", "--mode", "eager",
                    "--size", "tiny", cwd=tmp_path)
    assert proc.returncode == 0 and "2 of 2 cells agree; 0 failed" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow  # acceptance: real run/check/scale of a user's file
def test_scale_fits_a_file_from_outside_the_repository(mlp_file, tmp_path):
    out = tmp_path / "s.jsonl"
    proc = _harness("scale", "--workload", str(mlp_file), "--framework", "reference", "--size", "tiny",
                    "--batch", "1,2,4", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["batch"] for r in records) == [1, 2, 4] and {r["status"] for r in records} == {"ok"}
    # the derived bound is linear in the batch: two (B, D) float32 arrays
    assert {r["batch"]: r["bound_bytes"] for r in records} == {b: 2 * b * 8 * 4 for b in (1, 2, 4)}
