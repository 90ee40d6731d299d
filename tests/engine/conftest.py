import pytest

from harness.engine import parallel


@pytest.fixture(autouse=True)
def serial_slab_loops():
    # The engine's tests hold serial bounds unless they ask for threads: loading the
    # reference adapter elsewhere in the session sets the harness's thread count.
    before = parallel.count()
    parallel.set_count(1)
    yield
    parallel.set_count(before)
