"""`python -m harness bisect` stage 1 (releases) over a fake version list, with the
measurement replaced by known figures: what it prints, probes and exits with, and the
bad inputs (no network: GRADMEM_INDEX_VERSIONS stands in for the package index)."""

import json

import pytest

from harness.bisect import command as bisect_command
from harness import cli
from harness.versions import index
from harness.units import MIB

RELEASES = ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0", "1.6.0rc1", "1.6.0", "1.7.0"]


@pytest.fixture
def fake_index(tmp_path, monkeypatch):
    listing = tmp_path / "index.json"
    listing.write_text(json.dumps({"autograd": RELEASES}))
    monkeypatch.setenv(index.OFFLINE_VARIABLE, str(listing))
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path / "envs"))  # nothing cached
    index.released_versions.cache_clear()
    yield
    index.released_versions.cache_clear()


def fake_figures(monkeypatch, figures):
    probed = []

    def measure(self, candidate):
        probed.append(candidate)
        return figures[candidate] * MIB, ""

    monkeypatch.setattr(bisect_command.Prober, "measure", measure)
    return probed


def run(*extra):
    return cli.main(["bisect", "--workload", "rnn_fanout", "--framework", "autograd", *extra])


def test_names_the_first_bad_release(fake_index, monkeypatch, capsys):
    figures = {v: 10.0 for v in RELEASES}
    figures.update({"1.4.0": 60.0, "1.5.0": 60.0, "1.6.0": 60.0, "1.7.0": 60.0})
    probed = fake_figures(monkeypatch, figures)
    assert run("--good", "1.0.0", "--bad", "1.7.0") == 0
    out = capsys.readouterr().out
    assert "first bad release: autograd==1.4.0" in out and "last good release: autograd==1.3.0" in out
    assert "+500.0%" in out
    assert "1.6.0rc1" not in probed  # releases only
    assert probed[:2] == ["1.0.0", "1.7.0"] and probed[-2:] == ["1.3.0", "1.4.0"]  # boundary measured again
    for version in set(probed):  # every probe's figure is printed
        assert f"autograd=={version}" in out
    assert "60.00 MiB" in out and "10.00 MiB" in out


def test_no_difference_prints_both_figures(fake_index, monkeypatch, capsys):
    fake_figures(monkeypatch, {v: 10.0 + 0.1 * i for i, v in enumerate(RELEASES)})
    assert run("--good", "1.1.0", "--bad", "1.5.0") == 1
    out = capsys.readouterr().out
    assert "no difference beyond 5%: good autograd==1.1.0 10.10 MiB, bad autograd==1.5.0 10.50 MiB (+4.0%)" in out


@pytest.mark.parametrize(
    "good, bad, says",
    [
        ("1.0.0", "1.8.0", "--bad autograd 1.8.0 does not exist on the package index; nearest released versions of autograd: 1.4.0, 1.5.0, 1.6.0, 1.7.0"),
        ("1.2.0", "1.2.0", "--good and --bad are the same version (1.2.0): nothing to bisect"),
        ("1.5.0", "1.1.0", "--good 1.5.0 is newer than --bad 1.1.0"),
        ("1.0.*", "1.2.0", "--good '1.0.*' is not an exact PEP 440 version"),
    ],
)
def test_bad_versions_exit_2(fake_index, monkeypatch, capsys, good, bad, says):
    probed = fake_figures(monkeypatch, {})
    assert run("--good", good, "--bad", bad) == 2
    assert says in capsys.readouterr().err
    assert probed == []  # refused before anything is installed or measured


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--framework", "reference"], "reference has no releases or repository of its own"),
        (["--framework", "jax==0.9.2"], "name the framework alone; versions go to --good/--bad"),
        (["--metric", "peak"], "unknown metric 'peak'; valid metrics: step_peak, step_peak.forward, step_peak.backward, "
                               "step_peak.step, footprint, retained, code_pages, first_step_peak, first_step_footprint, time"),
        (["--metric", "step"], "--metric step_peak.step is the optimizer update's peak: give --optimizer sgd|adam"),
        (["--workload", "lstm"], "unknown workload 'lstm'"),
    ],
)
def test_bad_options_exit_2(fake_index, capsys, extra, says):
    argv = ["bisect", "--workload", "rnn_fanout", "--framework", "autograd", "--good", "1.0.0", "--bad", "1.7.0", *extra]
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


def test_first_step_metrics_read_the_cold_steps_figures():
    # the cold first step's peak and footprint, not the steady state's
    result = {
        "peak_bytes": {"total": 10}, "footprint_bytes": {"total": 30},
        "first_step_peak_bytes": {"total": 700}, "first_step_footprint_bytes": {"total": 900},
        "first_step_retained_detail_bytes": {"anon": 200, "file": 0, "shmem": 0},  # own pages kept: 200
    }
    assert bisect_command.figure(result, "first_step") == (700.0, "")
    assert bisect_command.figure(result, "first_footprint") == (900.0, "")
    assert bisect_command.figure({"peak_bytes": {"total": 1}}, "first_step")[0] is None


def test_a_recorded_finding_names_the_culprit_its_releases_and_the_command(fake_index, monkeypatch, tmp_path, capsys):
    figures = {v: 10.0 for v in RELEASES}
    figures.update({"1.4.0": 60.0, "1.5.0": 60.0, "1.6.0": 60.0, "1.7.0": 60.0})
    fake_figures(monkeypatch, figures)
    path = tmp_path / "autograd.commits.json"
    assert run("--good", "1.3.0", "--bad", "1.4.0", "--record", str(path)) == 0
    assert run("--good", "1.0.0", "--bad", "1.2.0", "--record", str(path)) == 1  # no difference: recorded too
    found = json.loads(path.read_text())
    assert [f["kind"] for f in found] == ["culprit", "no_difference"]
    assert found[0]["releases"] == ["1.3.0", "1.4.0"] and found[0]["first_bad"] == "autograd==1.4.0"
    assert found[0]["good_figure"] == 10.0 * MIB and found[0]["bad_figure"] == 60.0 * MIB
    assert found[0]["command"].startswith("python -m harness bisect --framework autograd --workload rnn_fanout")
    assert "--good 1.3.0 --bad 1.4.0" in found[0]["command"]
    # the same bisection again replaces its finding instead of listing it twice
    assert run("--good", "1.3.0", "--bad", "1.4.0", "--record", str(path)) == 0
    assert len(json.loads(path.read_text())) == 2


def test_a_record_file_that_is_not_a_findings_list_is_refused_before_measuring(fake_index, monkeypatch, tmp_path, capsys):
    probed = fake_figures(monkeypatch, {})
    path = tmp_path / "results.json"
    path.write_text('{"not": "a list"}')
    assert run("--good", "1.3.0", "--bad", "1.4.0", "--record", str(path)) == 2
    assert "not a findings file" in capsys.readouterr().err and probed == []
    assert run("--good", "1.3.0", "--bad", "1.4.0", "--releases", "1.3.0") == 2
    assert "two versions, GOOD,BAD" in capsys.readouterr().err


@pytest.mark.parametrize("tag, release", [("v1.7.0", "1.7.0"), ("rel-3.0.1", "3.0.1"), ("1.6.2", "1.6.2"),
                                          ("tinygrad-v0.12.0", "0.12.0"), ("3826c1e5428a", None), ("master", None)])
def test_a_tag_names_its_release_and_a_hash_or_branch_none(tag, release):
    from harness.bisect import findings
    assert findings.release_of(tag) == release
