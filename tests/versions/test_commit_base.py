"""The base environment of stage 2 holds the framework's own requirements
(harness/versions/commits.py): a commit's layer is installed with --no-deps, so a
dependency the base lacks is an ImportError at every commit (PyTensor: 'cons')."""

import importlib.metadata

import pytest

from harness import frameworks
from harness.versions import commits


def _planned_base(monkeypatch, name):
    seen = {}

    def build(base_name, pins, dists=()):
        seen.update(name=base_name, pins=pins)
        return object()

    monkeypatch.setattr(commits.envs, "build", build)
    monkeypatch.setattr(commits.envs, "layer", lambda *args, **kwargs: None)
    commits.environment(frameworks.get(name), repo=".", commit="0" * 40, build_hook="true")
    return seen


def test_the_base_pins_what_the_installed_release_requires(monkeypatch):
    try:
        needed = importlib.metadata.version("cons")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("PyTensor's requirement 'cons' is not installed here")
    base = _planned_base(monkeypatch, "pytensor")
    assert f"cons=={needed}" in base["pins"]
    assert len(base["pins"]) == len(set(base["pins"]))  # numpy is required four times, pinned once
    assert base["name"].startswith("pytensor-commit-base-")


def test_the_base_is_named_by_what_it_holds(monkeypatch):
    first = _planned_base(monkeypatch, "pytensor")
    monkeypatch.setattr(commits, "_framework_requirements", lambda adapter: ())
    second = _planned_base(monkeypatch, "pytensor")
    assert first["pins"] != second["pins"] and first["name"] != second["name"]
