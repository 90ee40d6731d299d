"""`harness releases`: bad input exits 2 before anything is installed; a yanked release
is skipped and named; an uninstallable one is an `unavailable` record and the sweep goes
on; --page-only writes the changes and the page from records (offline: a fake index, no
environment is built)."""

import json

import pytest

from harness import cli, results
from harness.frameworks.base import Unavailable
from harness.releases import command, listing, store
from harness.versions import envs, index


@pytest.fixture
def fake_index(tmp_path, monkeypatch):
    listed = tmp_path / "index.json"
    listed.write_text(json.dumps({"autograd": ["1.6", "1.7.0", "1.8.0", "1.9.0rc1"]}))
    monkeypatch.setenv(index.OFFLINE_VARIABLE, str(listed))
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path / "envs"))
    index.released_versions.cache_clear()
    yield tmp_path
    index.released_versions.cache_clear()


def releases(*extra):
    return cli.main(["releases", "--framework", "autograd", *extra])


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--framework", "reference"], "reference has no releases"),
        (["--framework", "jax==0.9.2"], "name the framework alone; the range is --from/--to"),
        (["--mode", "compiled"], "autograd has no 'compiled' mode; valid autograd modes: eager"),
        (["--from", "1.8.0", "--to", "1.6"], "--from 1.8.0 is newer than --to 1.6"),
        (["--from", "5.0"], "no release of autograd from 5.0 to the newest; released: 1.6, 1.7.0, 1.8.0"),
        (["--from", "1.*"], "--from '1.*' is not an exact PEP 440 version"),
        (["--repeats", "0"], "--repeats and --time-repeat must be >= 1"),
        (["--workload", "lstm"], "unknown workload 'lstm'"),
        (["--executor", "slurm"], "unknown executor 'slurm'; valid executors: local, ray"),
        (["--address", "10.0.0.5:6379"], "--address is the Ray cluster's: it needs --executor ray"),
        (["--retry", "error"], "--retry re-measures cells of an existing sweep: it needs --resume"),
        (["--resume", "--retry", "slow"], "unknown retry status 'slow'"),
        (["--torch-index", "pypi"], "--torch-index says where torch releases come from: it needs --framework torch"),
        (["--resume", "--from", "1.7.0", "--measure-again", "stale"],
         "--resume --measure-again withdraws the sweep records of the releases named: name them with --from and --to"),
        (["--resume", "--from", "1.7.0", "--to", "1.7.0", "--measure-again", "stale", "--retry", "error"],
         "--measure-again measures every record of the cells named again; --retry only those of some statuses"),
    ],
)
def test_bad_input_exits_2(fake_index, capsys, monkeypatch, extra, says):
    built = []
    monkeypatch.setattr(envs, "for_version", lambda *a, **k: built.append(a))
    assert releases("--out", str(fake_index / "out"), *extra) == 2
    assert says in capsys.readouterr().err
    assert built == []


def test_help_states_the_size_rule(capsys):
    # argparse formats help with %: a bare "5%" printed the option's internals instead
    with pytest.raises(SystemExit) as exit_:
        cli.main(["releases", "--help"])
    assert exit_.value.code == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "large (those whose flagged move is at least 5% and 1 MiB (growth per step: 16 KiB))" in said
    assert "option_strings" not in said


def test_yanked_releases_are_skipped_and_said():
    data = {"releases": {
        "1.0": [{"yanked": False, "upload_time": "2020-01-02T00:00:00"}],
        "1.1": [{"yanked": True, "yanked_reason": "broken wheel", "upload_time": "2020-02-02T00:00:00"}],
        "1.2rc1": [{"yanked": False, "upload_time": "2020-03-01T00:00:00"}],
        "1.2": [{"yanked": False, "upload_time": "2020-03-02T00:00:00"}],
        "0.9": [],  # no files: nothing to install
    }}
    found = listing._from_json(data)
    assert [(r.version, r.yanked) for r in found] == [("1.0", ""), ("1.1", "broken wheel"), ("1.2", "")]
    assert [r.version for r in listing.in_range(found, "1.1", None)] == ["1.1", "1.2"]


def test_an_uninstallable_release_is_recorded_and_the_sweep_goes_on(fake_index, monkeypatch, capsys):
    def refuse(adapter, version, torch_index=None, requires_python=None):
        raise Unavailable(f"pip install autograd=={version} failed (exit 1); the installer's last lines:\nno wheel")

    monkeypatch.setattr(envs, "for_version", refuse)
    out = fake_index / "out"
    assert releases("--from", "1.7.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert "autograd: 2 releases from 1.7.0 to 1.8.0" in said  # the pre-release is not swept
    assert said.count(": unavailable: pip install autograd==") == 2
    records = results.read_records(store.merged_path(str(out), "autograd"))
    assert [(r["version"], r["status"], r["release_round"]) for r in records] == [
        ("1.7.0", "unavailable", 1), ("1.8.0", "unavailable", 1)]
    assert "no wheel" in records[0]["message"]
    # run again: refused without --resume; with it nothing is tried again
    assert releases("--from", "1.7.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out)) == 2
    monkeypatch.setattr(envs, "for_version", lambda *a, **k: pytest.fail("retried an unavailable release"))
    assert releases("--from", "1.7.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out),
                    "--resume") == 0
    assert (out / "autograd.html").read_text().count("unavailable") >= 2
    # --retry unavailable tries them again, and their old records go
    tried = []

    def still_refuse(adapter, version, torch_index=None, requires_python=None):
        tried.append(version)
        raise Unavailable("pip install failed (exit 1); the installer's last lines:\nERROR: still no wheel")

    monkeypatch.setattr(envs, "for_version", still_refuse)
    assert releases("--from", "1.7.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out),
                    "--resume", "--retry", "unavailable") == 0
    assert tried == ["1.7.0", "1.8.0"]
    records = results.read_records(store.merged_path(str(out), "autograd"))
    assert [(r["version"], r["status"]) for r in records] == [("1.7.0", "unavailable"), ("1.8.0", "unavailable")]
    assert all("still no wheel" in r["message"] for r in records)


def test_measure_again_withdraws_the_named_releases_records_keeps_them_and_sweeps_anew(fake_index, monkeypatch,
                                                                                       capsys):
    """--resume --measure-again REASON: the records of the releases named (every round)
    move to FRAMEWORK.withdrawn.jsonl with the reason and are measured anew; the other
    releases' records stay; the page's release row says so. (Uninstallable releases make
    records without building anything: the move is the same for every status.)"""
    def refuse(message):
        def install(adapter, version, torch_index=None, requires_python=None):
            tried.append(version)
            raise Unavailable(f"pip install failed (exit 1); the installer's last lines:\n{message}")
        return install

    tried = []
    out = fake_index / "out"
    sweep = ["--from", "1.7.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out)]
    monkeypatch.setattr(envs, "for_version", refuse("first build"))
    assert releases(*sweep) == 0 and tried == ["1.7.0", "1.8.0"]
    tried.clear()
    monkeypatch.setattr(envs, "for_version", refuse("second build"))
    assert releases(*sweep[:-2], "--out", str(out), "--resume", "--to", "1.7.0",
                    "--measure-again", "planted: a broken environment") == 0
    assert tried == ["1.7.0"]  # only the release named
    said = capsys.readouterr().out
    assert f"autograd: 1 record(s) of 1 release(s) withdrawn to {out / 'autograd.withdrawn.jsonl'}" in said
    records = results.read_records(store.merged_path(str(out), "autograd"))
    assert sorted((r["version"], r["message"].splitlines()[-1]) for r in records) == [
        ("1.7.0", "second build"), ("1.8.0", "first build")]
    [withdrawn] = results.read_records(store.sweep_withdrawn_path(str(out), "autograd"))
    assert (withdrawn["version"], withdrawn[store.ROUND_KEY], withdrawn["withdrawn"]["reason"]) == (
        "1.7.0", 1, "planted: a broken environment")
    assert "first build" in withdrawn["message"]
    page = (out / "autograd.html").read_text()
    assert "measured again " in page and "1 earlier records withdrawn: planted: a broken environment" in page
    # a plain --resume measures nothing again: the withdrawn records stay withdrawn
    monkeypatch.setattr(envs, "for_version", lambda *a, **k: pytest.fail("measured again without being asked"))
    assert releases(*sweep, "--resume") == 0


def test_a_release_pip_does_not_offer_here_is_unavailable_not_a_refusal(fake_index, monkeypatch, capsys):
    # PyPI's JSON lists 1.9.0, pip's index (here the fake one) does not (e.g. it needs a newer Python)
    listed = [listing.Release("1.8.0", "", ""), listing.Release("1.9.0", "", "", ">=3.99")]
    monkeypatch.setattr(listing, "published", lambda dist: (listed, "PyPI JSON API"))

    def install(adapter, version, torch_index=None, requires_python=None):
        raise Unavailable(f"pip install autograd=={version} failed (exit 1); the installer's last lines:\n"
                          "ERROR: No matching distribution found (requires a different Python)")

    monkeypatch.setattr(envs, "for_version", install)
    out = fake_index / "out"
    assert releases("--from", "1.8.0", "--workload", "chained_dot", "--size", "tiny", "--out", str(out)) == 0
    records = results.read_records(store.merged_path(str(out), "autograd"))
    assert [(r["version"], r["status"]) for r in records] == [("1.8.0", "unavailable"), ("1.9.0", "unavailable")]
    assert "requires a different Python" in records[1]["message"]
    assert "(PyPI: autograd 1.9.0 requires Python >=3.99; this is 3." in records[1]["message"]


def test_torch_index_reaches_the_build_and_every_rounds_sweep(fake_index, monkeypatch):
    # torch releases are never downloaded unless asked: the sweep passes --torch-index to
    # the environment build and to each round's `harness run`, whose cells build it too
    asked = []

    def build(adapter, version, torch_index=None, requires_python=None):
        asked.append((adapter.name, version, torch_index))
        raise Unavailable("pip install torch failed (exit 1); the installer's last lines:\nno wheel")

    monkeypatch.setattr(envs, "for_version", build)
    monkeypatch.setattr(listing, "published", lambda dist: ([listing.Release("2.1.0", "", "")], "PyPI JSON API"))
    out = fake_index / "out"
    assert cli.main(["releases", "--framework", "torch", "--torch-index", "pypi", "--workload", "chained_dot",
                     "--mode", "eager", "--size", "tiny", "--out", str(out)]) == 0
    assert asked == [("torch", "2.1.0", "pypi")]
    import argparse

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args(["--framework", "torch", "--torch-index", "pypi", "--mode", "eager"])
    command.check(args)
    assert command.round_options(args).torch_index == "pypi"


def test_a_rounds_sweep_measures_as_harness_run_does_with_the_same_settings():
    # each round is `harness run`'s sweep of the release's cells (harness/sweep/api.py),
    # with run's defaults but the advisory time pass's and the timeout: a round's
    # records carry the settings `harness run --repeat 4 --time-budget 2 --timeout 99`
    # would, so either resumes the other's
    import argparse

    from harness.sweep import command as run_command

    run_parser, releases_parser = argparse.ArgumentParser(), argparse.ArgumentParser()
    run_command.add_arguments(run_parser)
    command.add_arguments(releases_parser)
    run_args = run_parser.parse_args(["--out", "x.jsonl", "--repeat", "4", "--time-budget", "2", "--timeout", "99",
                                      "--torch-index", "pypi"])
    args = releases_parser.parse_args(["--framework", "torch", "--time-repeat", "4", "--time-budget", "2",
                                       "--timeout", "99", "--torch-index", "pypi"])
    command.check(args)
    assert command.round_options(args) == run_command.options(run_args)
    how = command.round_how(args).check()
    assert (how.resume, how.quiet, how.schedule, how.executor) == (True, True, "serial", "local")


@pytest.mark.parametrize("extra, says", [
    (["--python", "3.10"], "--python '3.10' is not a PEP 440 version specifier (e.g. '<3.11'"),
    (["--python", "<3.11", "--executor", "ray"], "--python holds in this process only: not with --executor ray"),
])
def test_a_bad_python_requirement_exits_2(tmp_path, capsys, extra, says):
    from harness import cli

    assert cli.main(["releases", "--framework", "autograd", "--out", str(tmp_path), *extra]) == 2
    assert says in capsys.readouterr().err
