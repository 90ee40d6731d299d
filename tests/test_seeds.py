"""tools/seeds.py's argument checks, and the autograd adapter's API-era detection that
lets `harness bisect --repo` measure autograd's 2017 commits (docs/seeds.md)."""

import os
import subprocess
import sys

import pytest

from harness.frameworks import autograd as adapter_module

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(PROJECT, "tools", "seeds.py")


def _seeds(*args):
    return subprocess.run([sys.executable, SEEDS, *args], cwd=PROJECT, capture_output=True, text=True, timeout=120)


def test_unknown_section_exits_2_naming_the_sections():
    done = _seeds("nosuch")
    assert done.returncode == 2
    assert "autograd219" in done.stderr and "pr4746" in done.stderr


def test_autograd219_without_a_checkout_exits_2():
    done = _seeds("autograd219")
    assert done.returncode == 2 and "--repo" in done.stderr


def test_bad_size_exits_2():
    done = _seeds("pr4746", "--size", "huge")
    assert done.returncode == 2 and "tiny" in done.stderr


def _fake_autograd(tmp_path, with_extend):
    package = tmp_path / "autograd"
    package.mkdir()
    (package / "__init__.py").write_text("")
    if with_extend:
        (package / "extend.py").write_text("")
    return tmp_path


def _forget_getargspec(monkeypatch):
    """No inspect.getargspec (as on 3.11) for the test; monkeypatch restores the original
    state afterwards, removing the one the shim installs."""
    import inspect

    monkeypatch.setattr(inspect, "getargspec", None, raising=False)
    monkeypatch.delattr(inspect, "getargspec")


@pytest.mark.parametrize("with_extend,era", [(True, "extend"), (False, "2017")])
def test_era_read_from_the_package_files(tmp_path, monkeypatch, with_extend, era):
    _forget_getargspec(monkeypatch)
    monkeypatch.syspath_prepend(str(_fake_autograd(tmp_path, with_extend)))
    monkeypatch.delitem(sys.modules, "autograd", raising=False)
    assert adapter_module.api_era() == era
    import inspect

    # the shim is installed for a 2017 autograd only
    assert hasattr(inspect, "getargspec") == (era == "2017")


def test_2017_era_restores_getargspec_as_2017_autograd_calls_it(tmp_path, monkeypatch):
    import inspect

    _forget_getargspec(monkeypatch)
    monkeypatch.syspath_prepend(str(_fake_autograd(tmp_path, False)))
    monkeypatch.delitem(sys.modules, "autograd", raising=False)
    adapter_module.api_era()
    spec = inspect.getargspec(lambda a, b=2, *rest, **kw: None)  # noqa: the 2017 call
    assert (spec.args, spec.varargs, spec.keywords, spec.defaults) == (["a", "b"], "rest", "kw", (2,))


def test_commit_requirements_pin_2017_only_without_autograd_extend(tmp_path):
    repo = str(tmp_path / "repo")
    run = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True)
    os.makedirs(os.path.join(repo, "autograd"))
    subprocess.run(["git", "init", "-q", repo], check=True)
    open(os.path.join(repo, "autograd", "core.py"), "w").close()
    run("add", ".")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "2017")
    old = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    open(os.path.join(repo, "autograd", "extend.py"), "w").close()
    run("add", ".")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "1.2")
    adapter = adapter_module.AutogradAdapter()
    assert adapter.commit_requirements(repo, old) == ("2017", adapter_module.ERA_2017_PINS)
    assert adapter.commit_requirements(repo, "HEAD") is None
    # NumPy 1.24 removed np.int, which 2017's autograd.numpy uses: the pin stays below it
    numpy_pin = [p for p in adapter_module.ERA_2017_PINS if p.startswith("numpy==")][0]
    assert tuple(int(x) for x in numpy_pin.split("==")[1].split(".")[:2]) < (1, 24)
