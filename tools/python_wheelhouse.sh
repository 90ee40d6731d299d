#!/usr/bin/env bash
# Fill WHEELHOUSE with what tests/install/test_python_versions.py installs offline: NumPy
# (the version in .venv) for Python 3.12 and 3.13, and setuptools to build gradmem.
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
.venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: -d "$wheelhouse" 'setuptools>=68' \
    || echo "python_wheelhouse: no setuptools wheel" >&2
exit 0
