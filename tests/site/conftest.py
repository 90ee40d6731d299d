"""The observatory built once per test session from this repository (without the asv
history, which tests/site/test_observatory_build.py builds on its own where asv is set up)."""

import pathlib

import pytest

from harness.site import command

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("observatory")
    command.build_site(str(out), str(ROOT), with_history=False)
    return out
