"""The torch adapter on releases older than the one in .venv (1.13-2.5), checked with
stand-ins for what those releases lack, so no old torch is installed here.

- torch < 2.3 is built against NumPy 1.x: under NumPy 2 it imports (printing a warning)
  and fails at the first torch.from_numpy. load() must fail then, naming NumPy, so the
  release sweep builds it again with NumPy < 2 (harness/versions/era.py climbs only for
  a failure that names NumPy).
- torch 1.13 has no torch.compile; torch 2.0's refuses Python 3.11: compiled cells are
  `unavailable` with the reason, not an error in every cell.
- torch < 2.0 has no Tensor.untyped_storage(): the breakdown reads storage().untyped()
  (1.13) or storage()._untyped() (1.12).
- torch 2.1's compiled step leaves tracing-time tensors among those saved for backward;
  their storage raises "invalid python storage" at data_ptr(): they hold no bytes here
  and are skipped, not an error of the cell (tiny_nerf compiled on 2.1.0 was one).
"""

import types

import pytest

from harness import frameworks
from harness.frameworks import torch as torch_adapter
from harness.frameworks.base import Unavailable
from harness.versions import era


def fake_torch(version="1.13.1", from_numpy=None, has_compile=True):
    def refuse(array):
        raise RuntimeError("Numpy is not available")

    fake = types.SimpleNamespace(
        __version__=version,
        from_numpy=from_numpy or refuse,
        set_num_threads=lambda n: None,
        set_num_interop_threads=lambda n: None,
        get_num_threads=lambda: 1,
        get_num_interop_threads=lambda: 1,
    )
    if has_compile:
        fake.compile = lambda fn, **kw: fn
    return fake


def test_a_torch_that_cannot_take_numpy_arrays_fails_load_naming_numpy(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch", fake_torch("1.13.1+cu117"))
    with pytest.raises(Unavailable) as err:
        frameworks.get("torch").load("cpu", "eager")
    assert "torch 1.13.1+cu117 cannot exchange arrays with NumPy" in str(err.value)
    assert era.about_numpy(str(err.value))  # so the release is built again with numpy<2


def test_no_torch_compile_is_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch",
                        fake_torch("1.13.1", from_numpy=lambda a: a, has_compile=False))
    with pytest.raises(Unavailable, match=r"torch 1.13.1 has no torch.compile \(first released in PyTorch 2.0\)"):
        frameworks.get("torch").load("cpu", "compiled")


def test_a_python_torch_compile_refuses_is_unavailable(monkeypatch):
    eval_frame = pytest.importorskip("torch._dynamo.eval_frame")

    def refuse():
        raise RuntimeError("Python 3.11+ not yet supported for torch.compile")

    monkeypatch.setattr(eval_frame, "check_if_dynamo_supported", refuse)
    import torch

    with pytest.raises(Unavailable, match="torch.compile does not run on this Python: Python 3.11"):
        torch_adapter._check_dynamo_supported(torch)


def test_buffer_bytes_reads_a_storage_without_untyped_storage():
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(6, dtype=torch.float32)

    class Tensor113:  # 1.13: storage() is a TypedStorage with .untyped()
        def storage(self):
            return types.SimpleNamespace(untyped=tensor.untyped_storage)

    class Tensor112:  # 1.12: a _TypedStorage with ._untyped()
        def storage(self):
            return types.SimpleNamespace(_untyped=tensor.untyped_storage)

    for old in (Tensor113(), Tensor112()):
        found = frameworks.get("torch").buffer_bytes([old])
        assert list(found.values()) == [6 * 4]  # six float32
    assert found == frameworks.get("torch").buffer_bytes([tensor])  # the same storage, the same key


def test_buffer_bytes_skips_a_storage_with_no_memory_in_this_process():
    torch = pytest.importorskip("torch")
    real = torch.zeros(6, dtype=torch.float32)

    class Invalid:  # 2.1's leftover of tracing: its storage has no data pointer to read
        def untyped_storage(self):
            def refuse():
                raise RuntimeError("Attempted to access the data pointer on an invalid python storage.")
            return types.SimpleNamespace(device=real.device, data_ptr=refuse, nbytes=lambda: 1 << 20)

    class Fake:  # a FakeTensor's storage reads 0 (newer torch, with a warning)
        def untyped_storage(self):
            return types.SimpleNamespace(device=real.device, data_ptr=lambda: 0, nbytes=lambda: 1 << 20)

    found = frameworks.get("torch").buffer_bytes([Invalid(), real, Fake()])
    assert list(found.values()) == [6 * 4]  # the real tensor's six float32 only, not the 1 MiB either claims


def test_a_compiled_step_is_renamed_on_a_python_without_qualified_code_names():
    """Python 3.10's code objects have no co_qualname (replace() refuses the keyword):
    torch 2.0.1's compiled cells, on 3.10, were each an error until the rename skipped it."""
    from harness.frameworks import torch as torch_adapter

    class Python310Code:
        def replace(self, **changes):
            if "co_qualname" in changes:
                raise TypeError("'co_qualname' is an invalid keyword argument for replace()")
            return changes

    assert torch_adapter._renamed(Python310Code(), "step_3") == {"co_name": "step_3"}
    renamed = torch_adapter._renamed((lambda: None).__code__, "step_4")
    assert renamed.co_name == "step_4" and renamed.co_qualname == "step_4"
