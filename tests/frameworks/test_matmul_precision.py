"""--matmul-precision: every CUDA cell's float32 products run at one precision, set by
each adapter and recorded; the CPU is never changed."""

import subprocess
import sys

import pytest

from harness import choices, frameworks


@pytest.mark.parametrize("name", frameworks.NAMES)
def test_the_cpu_is_never_changed(name):
    assert frameworks.get(name).set_matmul_precision("cpu", "tf32") == "cpu: float32 products in float32"


def test_torch_turns_tf32_off_and_on_for_matmuls_and_cudnn():
    torch = pytest.importorskip("torch")
    adapter = frameworks.get("torch")
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:  # the flags are process settings: a CPU build holds them too
        said = adapter.set_matmul_precision("cuda", "highest")
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert "allow_tf32=False" in said
        adapter.set_matmul_precision("cuda", "tf32")
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_jax_sets_its_default_matmul_precision():
    jax = pytest.importorskip("jax")
    adapter = frameworks.get("jax")
    before = jax.config.jax_default_matmul_precision
    try:
        assert adapter.set_matmul_precision("cuda", "highest") == "jax_default_matmul_precision=highest"
        assert jax.config.jax_default_matmul_precision == "highest"
        adapter.set_matmul_precision("cuda", "tf32")
        assert jax.config.jax_default_matmul_precision == "tensorfloat32"
    finally:
        jax.config.update("jax_default_matmul_precision", before)


def test_a_bad_precision_is_refused_naming_the_choices():
    found = subprocess.run([sys.executable, "-m", "harness", "run", "--matmul-precision", "fp16"],
                           capture_output=True, text=True)
    assert found.returncode == 2
    assert all(choice in found.stderr for choice in choices.MATMUL_PRECISIONS)
