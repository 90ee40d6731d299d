"""`harness new-step`'s templates run as they are: one sweep over every framework's."""

import os
import subprocess
import sys

import pytest

from harness import frameworks, results
from harness.steps import templates

pytestmark = pytest.mark.slow  # acceptance: a memory and a time pass per framework (about 2 minutes)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# every template's MLP at tiny (B 4, D 8, H 16) in float32: its bound_bytes is the hidden
# activation and the output, B (H + D) x 4 bytes
BOUND = 4 * (16 + 8) * 4


def test_every_template_runs_as_it_is(tmp_path):
    paths = []
    for framework in templates.TEMPLATES:
        done = subprocess.run([sys.executable, "-m", "harness", "new-step", str(tmp_path / f"step_{framework}"),
                               "--framework", framework], capture_output=True, text=True, cwd=ROOT, check=True)
        assert "wrote" in done.stdout
        paths.append(str(tmp_path / f"step_{framework}.py"))
    out = tmp_path / "r.jsonl"
    subprocess.run([sys.executable, "-m", "harness", "run", "--workload", ",".join(paths), "--framework", "all",
                    "--size", "tiny", "--repeat", "1", "--time-budget", "0", "--no-prediction", "--out", str(out)],
                   capture_output=True, text=True, cwd=ROOT, timeout=1200)
    records = {r["framework"]: r for r in results.read_records(out)}
    assert sorted(records) == sorted(templates.TEMPLATES)  # one cell each: no row of another framework's step
    for framework, record in records.items():
        if record["status"] == "unavailable":  # the framework is not usable here (tinygrad without clang)
            ok, reason = frameworks.get(framework).available()
            assert not ok and record["message"] == reason
            continue
        assert record["status"] == "ok", (framework, record["message"])
        assert record["step_kind"] == "native" and record["bound_bytes"] == BOUND, framework
        assert record["grad_check"].startswith("not applicable: native step") and record["grad_rel_err"] is None
        assert set(record["peak_bytes"]) == {"total"} and record["time_s"]["total"] > 0
    if "torch" in records:  # torch's row lists what autograd saved: the template's math, byte for byte
        torch_counts_what_its_math_keeps(records["torch"])


def torch_counts_what_its_math_keeps(record):
    B, D, H = 4, 8, 16  # the template's tiny, float32
    parts = record["breakdown_bytes"]
    # what autograd saves for the backward that the step made: relu's output (B, H),
    # read by relu's and W2's gradients, and the output (B, D), read by mse_loss's;
    # x, y and the weights are the state's. That is the declared bound, byte for byte.
    assert parts["saved_activations"] == B * (H + D) * 4 == record["bound_bytes"]
    weights = (D * H + H + H * D + D) * 4  # two Linear layers with biases
    assert parts["params"] == parts["gradients"] == weights
    assert parts["inputs"] == 2 * B * D * 4 and parts["optimizer_state"] == 0  # plain SGD keeps nothing


def test_the_tinygrad_template_runs_on_tinygrads_python_device(tmp_path):
    # where the harness's tinygrad row is unavailable (no clang), the template's code is
    # still run, on tinygrad's pure-Python device: three steps, the loss going down
    pytest.importorskip("tinygrad")
    path = tmp_path / "step_tinygrad.py"
    path.write_text(templates.render("tinygrad", "step_tinygrad", str(path)))
    probe = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('s', sys.argv[1]); "
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
             "state = m.setup(dict(m.SIZES['tiny'], device='cpu', dtype='float32')); "
             "print(*[float(m.step(state).numpy()) for _ in range(3)])")
    done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DEV": "PYTHON"})
    assert done.returncode == 0, done.stderr[-2000:]
    losses = [float(x) for x in done.stdout.split()]
    assert len(losses) == 3 and losses[0] > losses[1] > losses[2]
