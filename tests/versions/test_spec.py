"""--framework NAME==VERSION parsing, the index's nearest versions, and the bisection
itself over fake figures (no install, no worker)."""

import pytest

from harness import frameworks
from harness.choices import ChoiceError
from harness.frameworks.base import Unavailable
from harness.bisect import bisection
from harness.versions import envs, index, spec


def test_frameworks_with_versions():
    pairs = spec.parse_frameworks("jax==0.9.2, jax==0.10.2,torch,jax==0.9.2", frameworks.NAMES)
    assert pairs == [("jax", "0.9.2"), ("jax", "0.10.2"), ("torch", None)]
    assert spec.parse_frameworks("all", frameworks.NAMES) == [(n, None) for n in frameworks.NAMES]
    assert spec.parse_item("tensorflow==2.15.0.post1", frameworks.NAMES) == ("tensorflow", "2.15.0.post1")


@pytest.mark.parametrize(
    "text, says",
    [
        ("jax>=0.9", "only an exact version"),
        ("jax==0.9.*", "not an exact PEP 440 version"),
        ("jax==0.9.2+cpu", "not an exact PEP 440 version"),
        ("jax==", "not an exact PEP 440 version"),
        ("jaxx==0.9.2", "valid frameworks: reference, autograd"),
    ],
)
def test_bad_framework_items(text, says):
    with pytest.raises(ChoiceError, match=says.replace("*", r"\*").replace("+", r"\+")):
        spec.parse_frameworks(text, frameworks.NAMES)


def test_nearest_versions_window():
    released = ["0.8.3", "0.9.0", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2"]
    assert index.nearest("0.9.3", released) == ["0.9.1", "0.9.2", "0.10.0", "0.10.1"]
    assert index.nearest("0.1", released) == released[:4]
    assert index.nearest("9.0", released) == released[-4:]


def test_unknown_version_names_the_nearest(tmp_path, monkeypatch):
    listing = tmp_path / "index.json"
    listing.write_text('{"jax": ["0.8.3", "0.9.0", "0.9.2", "0.10.0rc1", "0.10.2"]}')
    monkeypatch.setenv(index.OFFLINE_VARIABLE, str(listing))
    index.released_versions.cache_clear()
    with pytest.raises(ChoiceError, match=r"jax 0.9.1 does not exist .* nearest released versions of jax: 0.8.3, 0.9.0, 0.9.2, 0.10.2"):
        index.check_exists("jax", "0.9.1", what="jax")
    index.check_exists("jax", "0.9.2")
    assert index.between("jax", "0.8.3", "0.10.2") == ["0.9.0", "0.9.2"]  # no pre-release
    assert index.between("jax", "0.9.2", "0.10.2rc9") == ["0.10.0rc1"]
    index.released_versions.cache_clear()


def _measure(figures):
    calls = []

    def measure(candidate):
        calls.append(candidate)
        value = figures[candidate]
        return (None, "install failed") if value is None else (value, "")

    return measure, calls


def test_bisection_names_the_first_bad_and_confirms_it():
    names = [f"v{i}" for i in range(10)]
    figures = {n: 100.0 + (0.5 if i % 2 else 0) for i, n in enumerate(names)}  # noise under 5 %
    figures.update({n: 130.0 for n in names[6:]})
    measure, calls = _measure(figures)
    result = bisection.bisect(names, measure, 0.05)
    assert (result.kind, result.first_bad, result.last_good, result.confirmed) == ("culprit", "v6", "v5", True)
    assert calls[:2] == ["v0", "v9"] and calls[-2:] == ["v5", "v6"]  # ends first, boundary again last
    assert len(calls) <= 2 + 4 + 2  # ceil(log2(8)) probes between the ends


def test_bisection_finds_an_improvement_too_and_skips_what_cannot_install():
    names = ["a", "b", "c", "d", "e"]
    figures = {"a": 200.0, "b": 201.0, "c": None, "d": 150.0, "e": 150.0}
    result = bisection.bisect(names, _measure(figures)[0], 0.05)
    assert result.kind == "range" and result.last_good == "b" and result.suspects == ["c", "d"]
    assert [p.verdict for p in result.probes if p.verdict] .count("skipped") == 1


def test_bisection_without_a_difference_and_with_a_failed_end():
    result = bisection.bisect(["a", "b", "c"], _measure({"a": 100.0, "b": 300.0, "c": 104.0})[0], 0.05)
    assert result.kind == "no_difference" and (result.good_figure, result.bad_figure) == (100.0, 104.0)
    result = bisection.bisect(["a", "b"], _measure({"a": None, "b": 1.0})[0], 0.05)
    assert result.kind == "end_failed" and "a could not be measured: install failed" in result.message


def test_unconfirmed_boundary_is_said():
    seen = {"b": iter([130.0, 100.0])}
    figures = {"a": 100.0, "c": 130.0}

    def measure(candidate):
        return (next(seen[candidate]) if candidate in seen else figures[candidate]), ""

    result = bisection.bisect(["a", "b", "c"], measure, 0.05)
    assert result.first_bad == "b" and result.confirmed is False


def test_a_pinned_release_installs_what_its_adapter_names(monkeypatch):
    # MLX's front end has no backend on Linux: `mlx==V` alone does not load (every
    # release of a sweep came out unavailable), so its environment installs mlx[cpu]==V
    from harness import frameworks
    from harness.versions import envs

    asked = {}
    monkeypatch.setattr(envs, "cached", lambda name: None)
    monkeypatch.setattr(envs, "build_loading", lambda adapter, name, requirements, options, dists:
                        asked.setdefault(adapter, requirements))
    envs.for_version(frameworks.get("mlx"), "0.32.0")
    envs.for_version(frameworks.get("autograd"), "1.7.0")
    assert asked["mlx"][0] == "mlx[cpu]==0.32.0"
    assert asked["autograd"][0] == "autograd==1.7.0"


@pytest.mark.parametrize("name", [n for n in frameworks.NAMES if frameworks.get(n).package])
def test_a_release_is_installed_unasked_unless_its_adapter_says_the_index_must_be_named(monkeypatch, name):
    # torch: PyPI's wheels are CUDA builds of several GB, so the index is asked for
    adapter = frameworks.get(name)
    monkeypatch.setattr(envs, "cached", lambda name: None)
    monkeypatch.setattr(envs, "build_loading", lambda adapter, name, requirements, options, dists: options)
    if adapter.index_must_be_named:
        with pytest.raises(Unavailable, match=f"{name}==1.0 is not installed without being asked: .*--torch-index"):
            envs.for_version(adapter, "1.0")
        assert envs.for_version(adapter, "1.0", torch_index="https://example.org/cpu")[:2] == [
            "--index-url", "https://example.org/cpu"]
    else:
        assert envs.for_version(adapter, "1.0") == []


def test_a_torch_release_from_pypi_is_pinned_to_the_index_build_exactly(monkeypatch):
    # `torch==2.13.0` admits 2.13.0+cpu, and pip takes such a local build from the host's
    # find-links before PyPI's CUDA wheel: `--torch-index pypi` pins with `===`, which
    # only the version string itself satisfies; another index (the CPU one, whose
    # builds are named 2.13.0+cpu) keeps `==`
    from harness import frameworks
    from harness.versions import envs, era

    asked = []
    monkeypatch.setattr(envs, "cached", lambda name: None)
    monkeypatch.setattr(envs, "build_loading", lambda adapter, name, requirements, options, dists:
                        asked.append(requirements[0]))
    envs.for_version(frameworks.get("torch"), "2.13.0", torch_index="pypi")
    envs.for_version(frameworks.get("torch"), "2.13.0", torch_index="https://download.pytorch.org/whl/cpu")
    assert asked == ["torch===2.13.0", "torch==2.13.0"]
    # the exact pin is read back as its version: the release installed is not a difference
    assert era.differs(["torch===2.13.0"], {"torch": "2.13.0"}) == {}
    assert era.differs(["torch===2.13.0"], {"torch": "2.13.0+cpu"}) == {
        "torch": {"pinned": "2.13.0", "installed": "2.13.0+cpu"}}
