"""asv plugin: the `installed` environment, named by the versions it runs, not its path.

asv's `existing` environment is named after the interpreter's path
(`existing-py_tmp_gradmem-asv-venv_bin_python`) and stores that path as the results'
"python" key, so results from another checkout, temp path or machine never join one
series. `-E installed:PYTHON` runs the same installed interpreter (nothing is built,
`--set-commit-hash` is needed as for `existing`) but names it by its Python version
and the installed versions of the packages asv pins (below),

    py3.11-autograd1.9.1-jax0.10.2-jaxlib0.10.2-memory_profiler0.61.0-numpy2.4.6-...

and stores those as the results' keys ("python": "3.11", "torch": "2.13.0+cpu", ...):
the same on every machine with the same Python and framework versions, so two
machines' results sit side by side in one publish and a commit recorded twice lands in
one file (asv names that file by the md5 of the name once the name reaches 128
characters, as it does with the nine frameworks; the name stays in the file). The
versions are read from the interpreter itself (importlib.metadata), not copied from
the matrix, so a name never claims a version that is not installed; a matrix package
that is not installed is left out of the name (with a warning).

The framework pins are not written in asv.conf.json: both environments here add them
from pyproject.toml's framework extras (`framework_pins`), so a new framework row is its
adapter, its registry line and its extra, and asv installs and names it with no edit.
asv.conf.json's matrix keeps what is not a framework (NumPy, the memory sampler).
`virtualenv-pinned` is asv's virtualenv with those pins added: what `asv run A..B` and
`asv find` build, the same frameworks at every commit of a series (read from the
checkout asv runs from, not from each commit's pyproject).

asv loads this module through asv.conf.json's "plugins": [".harness.asv_env"]. It
imports without asv (the `bench` extra, absent from a plain install); the environments
are defined only where asv is.
"""

import json
import os
import re
import tomllib
from pathlib import Path

try:
    from asv import util
    from asv.console import log
    from asv.environment import EnvironmentUnavailable, ExistingEnvironment, get_env_name
    from asv.plugins.virtualenv import Virtualenv
except ImportError:  # asv is the `bench` extra; without it there is nothing to plug into
    ExistingEnvironment = None

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
PIN = re.compile(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?==(\S+)")


def framework_pins(pyproject=PYPROJECT):
    """{distribution: [version]} of every framework row's extra, as asv's matrix spells it:
    each `name==version` pin, and the distribution an extra of it brings where an adapter
    names that distribution (mlx[cpu] brings mlx-cpu at mlx's version)."""
    from harness import frameworks

    with open(pyproject, "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    named = {dist for name in frameworks.NAMES for dist in frameworks.get(name).distributions}
    pins = {}
    for name in frameworks.NAMES:
        for requirement in extras.get(name, ()):
            match = PIN.fullmatch(requirement)
            if not match:
                continue
            dist, brought, version = match.groups()
            pins[dist.lower()] = [version]
            for extra in (brought or "").split(","):
                if extra and f"{dist.lower()}-{extra}" in named:
                    pins[f"{dist.lower()}-{extra}"] = [version]
    return pins


def with_framework_pins(requirements):
    """asv's requirements of one environment, the framework extras' pins added; an entry
    the matrix names itself wins."""
    return {**{dist: versions[0] for dist, versions in framework_pins().items()}, **requirements}

VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "found = {}\n"
    "for name in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        found[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'versions': found}))\n"
)


def installed_versions(executable, names):
    """{"python": "3.11", "versions": {name: version}} of `executable`'s installation."""
    out = util.check_output([executable, "-c", VERSIONS, json.dumps(sorted(names))])
    return json.loads(out)


def env_name(python, versions, tagged_env_vars=None):
    return get_env_name(None, python, versions, tagged_env_vars or {})


if ExistingEnvironment is not None:

    class InstalledEnvironment(ExistingEnvironment):
        """An installed interpreter, named and keyed by its Python and package versions."""

        tool_name = "installed"

        def __init__(self, conf, executable, requirements, tagged_env_vars):
            if executable == "same":
                raise EnvironmentUnavailable("installed: name the interpreter, e.g. -E installed:.venv/bin/python")
            requirements = with_framework_pins(requirements)
            try:
                path = os.path.abspath(util.which(executable))
                found = installed_versions(path, requirements)
            except (util.ProcessError, OSError, ValueError) as err:
                raise EnvironmentUnavailable(f"installed:{executable}: {err}")
            missing = sorted(set(requirements) - set(found["versions"]))
            if missing:
                log.warning(f"installed:{executable}: not installed, left out of the name: {', '.join(missing)}")
            # `name` is read inside the base __init__, so these come first.
            self._version = found["python"]
            self._installed = found["versions"]
            super().__init__(conf, path, requirements, tagged_env_vars)
            self._python = self._version
            self._requirements = dict(self._installed)

        @property
        def name(self):
            return env_name(self._version, self._installed, self._tagged_env_vars)

    class PinnedVirtualenv(Virtualenv):
        """asv's virtualenv, with every framework extra's pin installed and in its name."""

        tool_name = "virtualenv-pinned"

        def __init__(self, conf, python, requirements, tagged_env_vars):
            super().__init__(conf, python, with_framework_pins(requirements), tagged_env_vars)
