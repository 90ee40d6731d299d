"""Suite-wide pytest settings.

``slow`` marks acceptance tests (real sweeps of several frameworks, installs from the
package index, asv runs, Chromium, a Ray cluster): `make test` and CI run everything;
``pytest -m "not slow"`` is the fast loop of unit tests.

`make test` runs the suite on two pytest-xdist workers, a file whole on one worker
(`--dist loadfile`), handing out files in collection order (`--no-loadscope-reorder`).
The files with acceptance tests take minutes each (asv find, two real releases,
Chromium: 1.5-5 min on the 2-core box, idle to loaded), so they go first: started last,
one of them kept a worker busy minutes after the other had run out of files
(2026-11-27: 24 min with them in place, load 9).
"""

import atexit
import os
import shutil
import tempfile

# torch.compile outside a worker (adapters loaded in the test process, as in
# tests/frameworks/test_torch_compile.py and test_adapter_remat.py) caches in Inductor's
# default /tmp/torchinductor_$USER, which outlives the run: 3.4 GB of it had gathered on a
# shared box over many runs. Each pytest process gets a cache of its own instead, removed
# when it exits. A worker's compiled pass is not affected: it points Inductor at its own
# empty cache whatever the environment says.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="gradmem-tests-inductor-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: an acceptance test (sweeps, installs, asv, Chromium, Ray); deselect with -m 'not slow'",
    )


def pytest_collection_modifyitems(config, items):
    """Files with a `slow` test first, the rest after, each in its own order (see above)."""
    heavy = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in heavy)  # stable: order within each part kept
