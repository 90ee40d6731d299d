"""A real memory pass writes exactly the record's fields (harness/results.py's one list)
and what the pass says of itself: a field added to the worker and not to the list, or
listed and not written, fails here instead of being dropped silently by the sweep."""

from harness import results
from harness.measure import worker

from one_pass import memory_pass


def test_a_memory_pass_writes_the_listed_fields_and_nothing_else(tmp_path):
    found = memory_pass("reference", "eager", tmp_path, predict=False)
    said_of_itself = set(worker.PASS_NOTES) | {"status", "baseline_rss_bytes", "hwm_method"}
    assert set(found) == set(results.MEMORY_PASS_FIELDS) | said_of_itself
    # the steady step and the cold first step from one definition
    for field in results.STEP_FIELDS:
        assert found[field] is not None and found[results.first_step(field)] is not None
    assert set(found["steady_samples"][0]) == set(worker.SAMPLE_FIELDS)
