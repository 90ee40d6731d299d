"""Offline environments for the version tests: pip may only read .venv/wheelhouse
(`make test` fills it: tools/python_wheelhouse.sh), environments go to a temporary
cache directory, never the user's."""

import glob
import os

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEELHOUSE = os.path.join(PROJECT, ".venv", "wheelhouse")
NEEDED = ("numpy", "scipy", "setuptools", "autograd")


def wheels_missing():
    have = {os.path.basename(p).split("-")[0].lower() for p in glob.glob(os.path.join(WHEELHOUSE, "*.whl"))}
    missing = [name for name in NEEDED if name not in have]
    return f".venv/wheelhouse lacks {', '.join(missing)} wheels (make test fills it)" if missing else ""


@pytest.fixture(scope="session")
def offline_env(tmp_path_factory):
    """os.environ for a subprocess: pip offline from the wheelhouse, a scratch env cache."""
    missing = wheels_missing()
    if missing:
        pytest.skip(missing)
    env = dict(os.environ)
    env.update(
        GRADMEM_ENV_DIR=str(tmp_path_factory.mktemp("envs")),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=WHEELHOUSE,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env
