"""The release store keeps what it holds: a store swept with 3 rounds and resumed with
--repeats 2 keeps its third round; the sweep's meta and the per-release wall time
accumulate over resumed and widened sweeps instead of being replaced by the last one."""

from harness import results
from harness.releases import store
from harness.sweep import resume


def _record(version, round_number=None, peak=1000):
    """A schema-valid record told apart by its message (an `unavailable` carries no figures)."""
    cell = {"framework": "autograd", "version": version, "workload": "chained_dot", "mode": "eager",
            "size": "tiny", "dtype": "float32", "device": "cpu"}
    record = results.new_record(cell, "unavailable", f"peak {peak}")
    if round_number is not None:
        record[store.ROUND_KEY] = round_number
    return record


def test_a_resume_with_fewer_repeats_keeps_every_round_held(tmp_path):
    out = str(tmp_path)
    results.write_records(store.merged_path(out, "autograd"), [_record("1.7.0", n, 1000 + n) for n in (1, 2, 3)])
    store.seed_rounds(out, "autograd", 2)  # a fresh checkout resumed with --repeats 2
    merged = store.merge(out, "autograd", 2)
    assert sorted(r[store.ROUND_KEY] for r in merged) == [1, 2, 3]
    assert [r["message"] for r in merged] == ["peak 1001", "peak 1002", "peak 1003"]


def test_more_repeats_than_held_still_merges_the_new_rounds(tmp_path):
    out = str(tmp_path)
    results.write_records(store.round_path(out, "autograd", 1), [_record("1.7.0")])
    results.write_records(store.round_path(out, "autograd", 4), [_record("1.7.0", peak=4)])
    assert store.rounds_held(out, "autograd", 2) == 4
    assert [r[store.ROUND_KEY] for r in store.merge(out, "autograd", 2)] == [1, 4]


def test_meta_accumulates_releases_and_upload_dates_over_sweeps(tmp_path):
    out = str(tmp_path)
    store.write_meta(out, "jax", {"releases": ["0.5.0", "0.10.0"], "uploaded": {"0.5.0": "a", "0.10.0": "b"},
                                  "last_sweep_wall_s": 100.0})
    store.write_meta(out, "jax", {"releases": ["0.7.1"], "uploaded": {"0.7.1": "c"}, "last_sweep_wall_s": 7.0})
    meta = store.read_meta(out, "jax")
    assert meta["releases"] == ["0.5.0", "0.7.1", "0.10.0"]  # version order, not text order
    assert meta["uploaded"] == {"0.5.0": "a", "0.10.0": "b", "0.7.1": "c"}
    assert meta["last_sweep_wall_s"] == 7.0  # the last invocation's, as the page says


def test_a_release_measured_in_two_sweeps_sums_its_measuring_time(tmp_path):
    out = str(tmp_path)
    store.write_env(out, "jax", "0.7.1", {"measure_s": 60.0, "disk_bytes": 1})
    store.write_env(out, "jax", "0.7.1", {"measure_s": 40.5, "disk_bytes": 2})
    assert store.read_envs(out, "jax")["0.7.1"] == {"measure_s": 100.5, "disk_bytes": 2}


def test_retry_forgets_only_the_retried_statuses_and_cells(tmp_path):
    """--retry drops the old records of the cells it measures again (by status and cell),
    in every round, so the new records do not stand beside the old ones; a retried
    `unavailable` release loses its environment entry (it is built again)."""
    from harness.sweep import resume

    out = str(tmp_path)
    failed = dict(_record("0.10.2"), status="error", workload="unet")
    for number in (1, 2):
        results.write_records(store.round_path(out, "jax", number), [_record("0.10.2"), failed, _record("0.11.0")])
    store.write_env(out, "jax", "0.10.2", {"disk_bytes": 1})
    store.write_env(out, "jax", "0.11.0", {"unavailable": "requires Python >=3.12"})
    every_cell = {resume.key(r) for r in (_record("0.10.2"), failed, _record("0.11.0"))}

    assert store.forget(out, "jax", "0.11.0", ("unavailable",), every_cell) == 2
    assert store.forget(out, "jax", "0.10.2", ("error",), {resume.key(_record("0.10.2"))}) == 0  # not that cell
    assert store.forget(out, "jax", "0.10.2", ("error",), every_cell) == 2
    for number in (1, 2):  # 0.10.2's unavailable record (another status) stays
        held = resume.records_in(store.round_path(out, "jax", number))
        assert [(r["version"], r["workload"], r["status"]) for r in held] == [("0.10.2", "chained_dot", "unavailable")]
    assert list(store.read_envs(out, "jax")) == ["0.10.2"]


def test_a_release_python_has_one_source_for_the_detector_and_the_page():
    """The workers' provenance says which Python ran a release; its environment's entry
    only where no worker ran (an older store's envs.json does not name it); an
    `unavailable` record names gradmem's own Python, never the release's."""
    ran = dict(_record("0.11.0"), status="ok")
    ran["provenance"] = {"python": "3.12.3"}
    refused = _record("0.12.0")
    refused["provenance"] = {"python": "3.11.7"}
    env_info = {"0.10.0": {"python": "3.11.7"}, "0.11.0": {}, "0.12.0": {"python": "3.12.3"}}
    assert store.release_pythons([ran, refused], env_info) == {
        "0.10.0": "3.11.7", "0.11.0": "3.12.3", "0.12.0": "3.12.3"}


def test_the_page_names_the_python_the_detector_compares(tmp_path):
    import os
    import sys

    from harness.releases import detect, page

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
    from report_fixtures import MIB, fixture_record

    records = []
    for release, python, peak in (("0.9.0", "3.11.7", 6), ("0.10.0", "3.11.7", 6), ("0.11.0", "3.12.3", 14)):
        for number in (1, 2):
            r = fixture_record("chained_dot", "jax", version=release,
                               peak_bytes={"forward": 4 * MIB, "backward": peak * MIB, "total": peak * MIB})
            r["provenance"]["python"] = python
            r[store.ROUND_KEY] = number
            records.append(r)
    env_info = {r: {"versions": {}} for r in ("0.9.0", "0.10.0", "0.11.0")}  # no "python": written by an older gradmem
    document = detect.report(records, detect.detect(records), "jax", env_info)
    assert {c["dependencies_differ"]["python"][1] for c in document["changes"]} == {"3.12.3"}
    html = page.render("jax", records, document, env_info, {})
    assert html.count("Python 3.12.3") == 1  # the release run by the other Python, in its row


def test_withdraw_moves_every_round_of_the_cells_named_and_nothing_else(tmp_path):
    """--resume --measure-again: the release's records of the cells named leave every
    round, whatever their status, each kept in FRAMEWORK.withdrawn.jsonl with its round
    and the reason; another cell or release stays; store.measured_again counts them."""
    out = str(tmp_path)
    other_cell = dict(_record("0.10.2"), workload="unet")
    for number in (1, 2):
        results.write_records(store.round_path(out, "jax", number),
                              [_record("0.10.2", peak=number), other_cell, _record("0.11.0")])
    taken = store.withdraw(out, "jax", "0.10.2", {resume.key(_record("0.10.2"))}, "stale bytecode", "2026-12-03T18:00:00")
    assert taken == 2
    for number in (1, 2):
        held = resume.records_in(store.round_path(out, "jax", number))
        assert [(r["version"], r["workload"]) for r in held] == [("0.10.2", "unet"), ("0.11.0", "chained_dot")]
    withdrawn = resume.records_in(store.sweep_withdrawn_path(out, "jax"))
    assert [(r[store.ROUND_KEY], r["message"], r["withdrawn"]["reason"]) for r in withdrawn] == [
        (1, "peak 1", "stale bytecode"), (2, "peak 2", "stale bytecode")]
    assert store.measured_again(withdrawn) == {
        "0.10.2": {"withdrawn": 2, "reason": "stale bytecode", "at": "2026-12-03T18:00:00"}}
    assert [r[store.ROUND_KEY] for r in store.merge(out, "jax", 2)] == [1, 1, 2, 2]
