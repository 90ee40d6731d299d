"""The adapter registry against the files that install its rows: each framework's
pyproject extra (what `available()` tells a user to install) and asv's environment
matrix (what `asv run` installs) pin what the adapter names, so a new row is its adapter,
its registry line and its extra, and asv.conf.json cannot drift from them unnoticed."""

import json
import os
import re
import tomllib

import pytest

from harness import frameworks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WITH_RELEASES = [n for n in frameworks.NAMES if frameworks.get(n).package]


def extras():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"]


def pins(requirements):
    """{distribution: version} of `name[extra]==version` requirements."""
    found = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==(\S+)", requirement)
        if match:
            found[match.group(1).lower()] = match.group(3)
    return found


def asv_matrix():
    """asv.conf.json's `matrix.req` (asv's JSON allows // comment lines)."""
    with open(os.path.join(ROOT, "asv.conf.json"), encoding="utf-8") as handle:
        text = "".join(line for line in handle if not line.lstrip().startswith("//"))
    return json.loads(text)["matrix"]["req"]


@pytest.mark.parametrize("name", WITH_RELEASES)
def test_each_framework_row_has_its_extra_pinning_its_package(name):
    adapter = frameworks.get(name)
    assert name in extras(), f"pyproject.toml has no extra {name!r}, which `{name}` unavailable tells users to install"
    assert adapter.package.lower() in pins(extras()[name]), (adapter.package, extras()[name])


def test_the_frameworks_extra_installs_every_row():
    (every,) = extras()["frameworks"]
    assert sorted(re.fullmatch(r"gradmem\[(.*)\]", every).group(1).split(",")) == sorted(WITH_RELEASES)


def test_asv_installs_what_the_extras_pin():
    """Every pin of a framework extra is in asv's matrix at that version, and every
    matrix entry is a pin of an extra or a distribution of an adapter (mlx-cpu: the
    backend mlx[cpu] brings, at mlx's version), but NumPy (the runtime, pinned apart)."""
    matrix = asv_matrix()
    pinned = {}
    for name in WITH_RELEASES + ["bench"]:
        pinned.update(pins(extras()[name]))
    missing = [d for d in pins(sum((extras()[n] for n in WITH_RELEASES), [])) if d not in matrix]
    assert not missing, f"asv.conf.json's matrix lacks {missing}, pinned by pyproject's framework extras"
    for dist, versions in matrix.items():
        if dist == "numpy":
            continue
        if dist in pinned:
            assert versions == [pinned[dist]], (dist, versions, pinned[dist])
            continue
        owner = [n for n in WITH_RELEASES if dist in frameworks.get(n).distributions]
        assert owner, f"asv.conf.json pins {dist}, which no extra and no adapter names"
        package = frameworks.get(owner[0]).package.lower()
        assert versions == [pinned[package]], (dist, versions, package, pinned[package])
