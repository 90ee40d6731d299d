#!/usr/bin/env bash
# Fill WHEELHOUSE with what tests install offline: NumPy (the version in .venv) for
# Python 3.12 and 3.13 (tests/install), NumPy, SciPy and autograd for .venv's
# Python (tests/versions), and setuptools to build gradmem.
# Called by `make test`; a download that fails (no index) leaves the wheelhouse short
# and that test skips, naming what is missing.
#
#   tools/python_wheelhouse.sh WHEELHOUSE
set -uo pipefail
cd "$(dirname "$0")/.."
wheelhouse=${1:?usage: tools/python_wheelhouse.sh WHEELHOUSE}
mkdir -p "$wheelhouse"
numpy=$(.venv/bin/python -c 'import numpy; print(numpy.__version__)')
for version in 3.12 3.13; do
    .venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version "$version" -d "$wheelhouse" "numpy==$numpy" \
        || echo "python_wheelhouse: no NumPy $numpy wheel for Python $version" >&2
done
# the version bisection test (tests/versions) builds environments offline for this
# Python: NumPy and SciPy (the autograd adapter's) at the versions .venv has
# and the installed autograd itself (a pinned version's environment, built offline)
scipy=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("scipy"))')
autograd=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("autograd"))')
.venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: -d "$wheelhouse" \
    "numpy==$numpy" "scipy==$scipy" "autograd==$autograd" \
    || echo "python_wheelhouse: no NumPy/SciPy/autograd wheels for .venv's Python" >&2
.venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: -d "$wheelhouse" 'setuptools>=68' \
    || echo "python_wheelhouse: no setuptools wheel" >&2
exit 0
