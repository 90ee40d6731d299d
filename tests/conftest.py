"""Suite-wide pytest settings.

``slow`` marks acceptance tests (real sweeps of several frameworks, installs from the
package index, asv runs, Chromium, a Ray cluster): `make test` and CI run everything;
``pytest -m "not slow"`` is the fast loop of unit tests.
"""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: an acceptance test (sweeps, installs, asv, Chromium, Ray); deselect with -m 'not slow'",
    )
