"""pytest fixtures for the report tests (records are built in report_fixtures.py)."""

import pytest

from report_fixtures import fixture_records, write_jsonl


@pytest.fixture
def records_file(tmp_path):
    return write_jsonl(tmp_path / "fixture.jsonl", fixture_records())
