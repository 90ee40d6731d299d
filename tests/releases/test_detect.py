"""The change detector on synthetic series: a move beyond the measured run-to-run band is a
change, noise within it is not, whatever the percentage (harness/releases/detect.py)."""

import pytest

from harness import frameworks
from harness.frameworks.base import Unavailable
from harness.releases import detect
from harness.units import MIB
from harness.versions import commits


def records(series, figure_key="peak_bytes", workload="chained_dot", mode="eager", time=False):
    """Records of one cell: {release: [value per round]} (MiB; seconds when `time`)."""
    out = []
    for release, values in series.items():
        for value in values:
            figure = value if time else int(value * MIB)
            record = {"workload": workload, "mode": mode, "status": "ok", "version": release,
                      "peak_bytes": {"total": int(20 * MIB)}, "time_s": {"total": 0.01}}
            if figure_key in ("peak_bytes", "time_s"):
                record[figure_key] = {"total": figure}
            else:
                record[figure_key] = figure
            if figure_key == "retained_bytes":  # the framework's own pages, as the worker splits them
                record["retained_detail_bytes"] = {"anon": figure, "file": 0, "shmem": 0}
            out.append(record)
    return out


def changes_of(found, figure):
    return [c for c in found.changes if c.figure == figure]


def test_a_step_beyond_the_band_is_flagged_with_its_size_band_and_release():
    # rounds spread by 0.8 MiB; the next release's rounds all sit 1.8 MiB higher
    found = detect.detect(records({"1.0": [10.0, 10.5, 10.8], "1.1": [12.3, 12.0, 12.6]}))
    (change,) = changes_of(found, "step_peak")
    assert (change.before_release, change.release, change.direction) == ("1.0", "1.1", "up")
    assert abs(change.delta - 1.8 * MIB) < 2  # medians 10.5 -> 12.3
    assert abs(change.band - 0.8 * MIB) < 2  # the larger spread of the two releases' rounds


def test_noise_within_the_band_is_not_flagged():
    # the two releases' rounds interleave: the medians differ (0.3 MiB) by less than the spread (1 MiB)
    found = detect.detect(records({"1.0": [10.0, 11.0, 10.5], "1.1": [10.8, 10.2, 11.1]}))
    assert changes_of(found, "step_peak") == []
    assert ("chained_dot", "eager", "step_peak") in [f[:3] for f in found.flat]


def test_the_band_is_measured_not_a_percentage():
    # a noisy cell: +7 % between medians but within its 20 MiB run-to-run band -> not a change
    noisy = detect.detect(records({"1.0": [100.0, 120.0, 110.0], "1.1": [118.0, 125.0, 105.0]}))
    assert changes_of(noisy, "step_peak") == []
    # a steady cell: +2 % (1 MiB on 50), every round alike: beyond the 256 KiB grain -> a change
    steady = detect.detect(records({"1.0": [50.0, 50.0, 50.0], "1.1": [51.0, 51.0, 51.0]}))
    (change,) = changes_of(steady, "step_peak")
    assert change.band == detect.GRAIN_BYTES  # spread 0: the instrument's grain is the floor
    # ... but not a move smaller than the grain, however steady
    grain = detect.detect(records({"1.0": [50.0, 50.0], "1.1": [50.2, 50.2]}))
    assert changes_of(grain, "step_peak") == []


def test_overlapping_rounds_are_not_a_change_even_past_the_band():
    # medians 10 -> 12.5 (beyond the band, 2 MiB) but 1.1's lowest round lies below 1.0's highest
    found = detect.detect(records({"1.0": [9.0, 10.0, 11.0], "1.1": [10.5, 12.5, 12.5]}))
    assert changes_of(found, "step_peak") == []


def test_one_round_is_not_judged_and_releases_go_in_version_order():
    found = detect.detect(records({"1.9": [10.0], "1.10": [30.0]}))
    assert found.changes == [] and found.unjudged >= 1
    # 1.10 comes after 1.9 (not after 1.1 as text would sort): the step is at 1.10
    found = detect.detect(records({"1.10": [30.0, 30.1], "1.9": [10.0, 10.1], "1.1": [10.0, 10.1]}))
    (change,) = changes_of(found, "step_peak")
    assert (change.before_release, change.release) == ("1.9", "1.10")


def test_time_changes_are_advisory_and_the_report_says_what_moved():
    found = detect.detect(records({"1.0": [0.010, 0.011], "1.1": [0.020, 0.021]}, figure_key="time_s", time=True))
    (change,) = changes_of(found, "time")
    assert change.advisory
    recs = records({"1.0": [10.0, 10.1], "1.1": [14.0, 14.1]})
    for r in recs:  # the backward phase and the saved activations carry the move
        big = r["version"] == "1.1"
        r["peak_bytes"] = {"total": r["peak_bytes"]["total"], "forward": 5 * MIB, "backward": r["peak_bytes"]["total"]}
        r["breakdown_bytes"] = {"params": MIB, "saved_activations": (8 if big else 4) * MIB}
    document = detect.report(recs, detect.detect(recs), "autograd", {}, size="tiny")
    (entry,) = [c for c in document["changes"] if c["figure"] == "step_peak"]
    assert entry["parts"]["moved"] == "breakdown.saved_activations +4.00 MiB"
    assert entry["parts"]["phase"]["forward"] == 0 and entry["parts"]["phase"]["backward"] > 3.9 * MIB
    assert "--metric step_peak --good 1.0 --bad 1.1" in entry["command"] and "--size tiny" in entry["command"]
    assert "--repo CHECKOUT" in entry["commit_command"]  # autograd is pure Python: stage 2 finds the commit


@pytest.mark.parametrize("name", [n for n in frameworks.NAMES if frameworks.get(n).package])
def test_the_report_offers_stage_2_exactly_where_bisect_installs_a_commit_without_a_hook(monkeypatch, name):
    # Both read the adapter's `installs_from_source`: a commit command on the release
    # page must be one `harness bisect --repo` runs as given (PyTensor once disagreed).
    recs = records({"1.0": [10.0, 10.1], "1.1": [14.0, 14.1]})
    (entry,) = [c for c in detect.report(recs, detect.detect(recs), name, {})["changes"] if c["figure"] == "step_peak"]
    monkeypatch.setattr(commits.envs, "build", lambda *args, **kwargs: object())
    monkeypatch.setattr(commits.envs, "layer", lambda *args, **kwargs: "the commit's layer")
    try:
        installs = commits.environment(frameworks.get(name), repo=".", commit="0" * 40) == "the commit's layer"
    except Unavailable as err:
        assert "--build-hook" in str(err)
        installs = False
    assert ("commit_command" in entry) == installs
    if installs:
        assert "--repo CHECKOUT" in entry["commit_command"] and "--build-hook" not in entry["commit_command"]


def test_a_moved_prediction_is_its_own_figure_beside_the_measured_ones():
    # the plan changed (predicted +4 MiB) while the measured step peak stayed: the
    # detector lists the prediction's move and leaves the step peak flat
    out = []
    for release, predicted in (("1.0", 40.0), ("1.1", 44.0)):
        for peak in (50.0, 50.1, 49.9):
            out.append({"workload": "chained_dot", "mode": "compiled", "status": "ok", "version": release,
                        "peak_bytes": {"total": int(peak * MIB)}, "time_s": {"total": 0.01},
                        "prediction": {"state": "predicted", "bytes": int(predicted * MIB)}})
    found = detect.detect(out)
    (change,) = changes_of(found, "predicted")
    assert change.release == "1.1" and abs(change.delta - 4 * MIB) < 2
    assert changes_of(found, "step_peak") == []
    listed = detect.report(out, found, "jax", {})["changes"]
    assert [c["command"] for c in listed if c["figure"] == "predicted"] == [None]  # nothing to bisect


def test_a_change_across_releases_this_series_skipped_says_where_it_may_lie():
    # chained_dot measured at every release, unet only at 1.0 and 1.3 (a narrower later
    # sweep): unet's move is somewhere in 1.1..1.3, not at 1.3 itself
    every = records({"1.0": [10.0, 10.0], "1.1": [10.0, 10.0], "1.2": [12.0, 12.0], "1.3": [12.0, 12.0]})
    gapped = records({"1.0": [5.0, 5.0], "1.3": [9.0, 9.0]}, workload="unet")
    found = detect.detect(every + gapped)
    (consecutive,) = [c for c in changes_of(found, "step_peak") if c.workload == "chained_dot"]
    (skipping,) = [c for c in changes_of(found, "step_peak") if c.workload == "unet"]
    assert consecutive.unmeasured_between == ()
    assert (skipping.before_release, skipping.release, skipping.unmeasured_between) == ("1.0", "1.3", ("1.1", "1.2"))
    document = detect.report(every + gapped, found, "jax", {})
    said = detect.summary(document)
    assert "not consecutive: 2 release(s) between (1.1..1.2)" in said
    assert said.count("not consecutive") == len([c for c in document["changes"] if c["workload"] == "unet"])


def test_a_change_where_the_python_changes_says_so():
    """JAX 0.11 needs Python 3.12 and ran there (interpreters.py), 0.10.2 on 3.11: a move
    between them may be the interpreter's, and the change must say the Python differs."""
    recs = records({"0.10.2": [13.5, 13.6], "0.11.0": [4.3, 4.4], "0.11.1": [4.3, 4.4]}, figure_key="retained_bytes")
    for r in recs:
        r["provenance"] = {"python": "3.11.7" if r["version"] == "0.10.2" else "3.12.1"}
    document = detect.report(recs, detect.detect(recs), "jax", {})
    (entry,) = [c for c in document["changes"] if c["figure"] == "retained"]
    assert entry["release"] == "0.11.0" and entry["dependencies_differ"] == {"python": ["3.11.7", "3.12.1"]}
