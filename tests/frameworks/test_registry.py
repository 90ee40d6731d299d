"""The adapter registry against the files that install its rows: each framework's
pyproject extra (what `available()` tells a user to install) pins what the adapter names,
and asv's environments take those pins from the extras (harness/asv_env.py), so a new row
is its adapter, its registry line and its extra, and asv.conf.json names no framework."""

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


def test_asv_installs_what_the_extras_pin_and_its_config_names_no_framework():
    """asv's environments install and are named by every framework extra's pins, read from
    pyproject.toml (mlx-cpu: the backend mlx[cpu] brings, at mlx's version); asv.conf.json's
    matrix holds only what is no framework's, so adding a row never edits it."""
    from harness.asv_env import framework_pins

    asv_pins = framework_pins()
    for name in WITH_RELEASES:
        package = frameworks.get(name).package.lower()
        assert asv_pins.get(package) == [pins(extras()[name])[package]], (name, asv_pins.get(package))
    assert asv_pins["mlx-cpu"] == asv_pins["mlx"]
    named = {dist for name in frameworks.NAMES for dist in frameworks.get(name).distributions} - {"numpy"}
    assert not named & set(asv_matrix()), f"asv.conf.json pins {named & set(asv_matrix())}: pyproject's extras do"
    with open(os.path.join(ROOT, "asv.conf.json"), encoding="utf-8") as handle:
        text = "".join(line for line in handle if not line.lstrip().startswith("//"))
    assert json.loads(text)["environment_type"] == "virtualenv-pinned"
    assert asv_matrix()["memory_profiler"] == [pins(extras()["bench"])["memory_profiler"]]
