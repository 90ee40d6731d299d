"""The release store keeps what it holds: a store swept with 3 rounds and resumed with
--repeats 2 keeps its third round; the sweep's meta and the per-release wall time
accumulate over resumed and widened sweeps instead of being replaced by the last one."""

from harness import results
from harness.releases import store


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


def test_forgetting_an_unavailable_release_leaves_the_others(tmp_path):
    """--retry-unavailable drops a release's old `unavailable` records and its envs entry
    before trying it again, so the new records do not stand beside the old ones."""
    out = str(tmp_path)
    for number in (1, 2):
        results.write_records(store.round_path(out, "jax", number), [_record("0.10.2"), _record("0.11.0")])
    store.write_env(out, "jax", "0.10.2", {"disk_bytes": 1})
    store.write_env(out, "jax", "0.11.0", {"unavailable": "requires Python >=3.12"})
    store.forget_release(out, "jax", "0.11.0")
    for number in (1, 2):
        assert [r["version"] for r in store.read(store.round_path(out, "jax", number))] == ["0.10.2"]
    assert list(store.read_envs(out, "jax")) == ["0.10.2"]
