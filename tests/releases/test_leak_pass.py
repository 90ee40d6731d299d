"""The growth per step across releases: a leak-only pass of a store whose records lack it.

A planted store (tests/report/report_fixtures.py records, no environment built, no
network): two sweep rounds of chained_dot at 1.7.0, 1.8.0 and 1.9.0, none with the
leak phase. The leak-only pass's memory passes are a fake measurer whose step peaks are
far from the sweep's (a newer gradmem) and whose growth per step is planted: 1.8.0
grows by 40 KiB a step, its neighbours are flat. The detector and the page read the
growth alone from those records, flag the start and the stop of growth, and the
side-by-side run judges them with the figure's own grain and size rule."""

import json
import os
import sys

import pytest

from harness import cli, figures
from harness.frameworks.base import Unavailable
from harness.releases import confirm, detect, leak_pass, page, side_by_side
from harness.sweep import cells
from harness.sweep.cell_runner import CellRunner, Options
from harness.units import KIB
from harness.versions import envs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from report_fixtures import MIB, fixture_record, write_jsonl  # noqa: E402

RELEASES = ("1.7.0", "1.8.0", "1.9.0")
#: what each release's step gains a step, and the verdict its leak phase gives
GROWTH = {"1.7.0": (0, "flat"), "1.8.0": (40 * KIB, "grows"), "1.9.0": (0, "flat")}
NEWER_PEAK = 50 * MIB  # the leak pass's step peak: a newer gradmem's, far from the sweep's 6 MiB


def sweep_record(release, number, workload="chained_dot", **extra):
    found = fixture_record(workload, "autograd", version=release, **extra)
    found["provenance"]["versions"]["autograd"] = release
    return dict(found, release_round=number)


def with_growth(record, per_step, verdict):
    return dict(record, leak={"verdict": verdict, "bytes_per_step": per_step, "readings": 8, "samples": []})


def leak_record(release, number=1, jitter=0):
    per_step, verdict = GROWTH[release]
    found = sweep_record(release, number, peak_bytes={"forward": NEWER_PEAK, "backward": NEWER_PEAK,
                                                      "total": NEWER_PEAK})
    return with_growth(found, per_step + jitter, verdict)


class Measurer:
    """Stands in for the memory passes (harness/sweep/memory_passes.py)."""

    def __init__(self):
        self.measured = []

    def __call__(self, cells):
        for cell in cells:
            self.measured.append(cell["version"])
            found = leak_record(cell["version"], jitter=len(self.measured) * 512)
            found.pop("release_round")
            yield cell, found

    def close(self):
        pass


@pytest.fixture
def store(tmp_path, monkeypatch):
    out = tmp_path / "releases"
    out.mkdir()
    sweep = [sweep_record(r, n) for r in RELEASES for n in (1, 2)]
    sweep.append(sweep_record("1.9.0", 1, workload="unet", status="error", message="failed at this release"))
    write_jsonl(out / "autograd.jsonl", sweep)
    (out / "autograd.envs.json").write_text(json.dumps({r: {"versions": {"autograd": r}} for r in RELEASES}))
    measurer = Measurer()

    def passes(options, reference):
        measurer.options, measurer.reference = options, reference
        return type("Passes", (), {"run": staticmethod(measurer), "close": lambda self: None})()

    monkeypatch.setattr(leak_pass, "MemoryPasses", passes)
    built = []
    monkeypatch.setattr(envs, "cached", lambda name: None)
    monkeypatch.setattr(envs, "for_version", lambda adapter, version, **k: built.append(version) or type(
        "Env", (), {"path": str(tmp_path / f"env-{version}")})())
    monkeypatch.setattr(envs, "remove", lambda path: True)
    return out, measurer, built


def releases(out, *extra):
    return cli.main(["releases", "--framework", "autograd", "--out", str(out), *extra])


def test_the_plan_is_every_ok_cell_without_the_figure():
    held = [sweep_record(r, 1) for r in RELEASES]
    held.append(sweep_record("1.9.0", 1, workload="unet", status="error"))  # failed there: nothing to compare
    held.append(with_growth(sweep_record("1.9.0", 1, workload="rnn_fanout"), 0, "flat"))  # a newer sweep's: has it
    planned = leak_pass.plan(held, "autograd")
    assert {r: [(c["workload"], c["mode"], c["version"]) for c in cells] for r, cells in planned.items()} == {
        r: [("chained_dot", "eager", r)] for r in RELEASES}
    assert list(leak_pass.plan(held, "autograd", first="1.8.0", last="1.8.0")) == ["1.8.0"]
    assert leak_pass.plan(held, "autograd", workloads_=["unet"]) == {}


def test_the_leak_records_are_read_for_the_growth_per_step_alone():
    sweep = [sweep_record(r, n) for r in RELEASES for n in (1, 2)]
    leak = [leak_record(r, n) for r in RELEASES for n in (1, 2)]
    series = detect.series(sweep, leak)
    # the sweep's step peak only: the leak pass's 50 MiB (a newer gradmem's) joins no series
    assert series[("chained_dot", "eager", "step_peak")] == {r: [6 * MIB] * 2 for r in RELEASES}
    assert series[("chained_dot", "eager", detect.GROWTH)] == {r: [GROWTH[r][0]] * 2 for r in RELEASES}
    found = detect.detect(sweep, leak)
    assert {c.figure for c in found.changes} == {detect.GROWTH}
    # read alone, the same records would flag the newer step peak at every release they hold
    mixed = detect.detect(sweep[:2] + [dict(r, release_round=3) for r in leak if r["version"] == "1.8.0"])
    assert "step_peak" in {c.figure for c in mixed.changes}


def test_a_start_and_a_stop_of_growth_are_flagged_changes_saying_so():
    sweep = [sweep_record(r, n) for r in RELEASES for n in (1, 2)]
    leak = [leak_record(r, n, jitter=n * 256) for r in RELEASES for n in (1, 2)]
    document = detect.report(sweep, detect.detect(sweep, leak), "autograd", {}, leak=leak)
    changes = {(c["before_release"], c["release"]): c for c in document["changes"] if c["figure"] == detect.GROWTH}
    assert set(changes) == {("1.7.0", "1.8.0"), ("1.8.0", "1.9.0")}
    start, stop = changes[("1.7.0", "1.8.0")], changes[("1.8.0", "1.9.0")]
    assert start["growth"] == "starts growing" and stop["growth"] == "stops growing"
    assert start["parts"]["verdicts"] == {"before": ["flat", "flat"], "after": ["grows", "grows"]}
    assert start["direction"] == "up" and start["worse"] and not start["advisory"]
    # the band is the figure's own grain (4 KiB), not the 256 KiB of the memory figures
    assert start["band"] == figures.get(detect.GROWTH).grain == 4096
    said = detect.summary(document)
    assert "change chained_dot eager leak: 1.7.0 -> 1.8.0 0.4 KiB -> 40.4 KiB, band" in said
    # no share of a base that is zero give or take a page: "+10,000 %" says nothing (a
    # base below zero read "-10775.0 %" for a rise, tinygrad 0.12.0 -> 0.13.0)
    assert start["relative"] is None and detect.relative(detect.GROWTH, -300.0, 36 * 1024) is None
    assert detect.relative("step_peak", 2.0, 3.0) == 0.5 and detect.relative("step_peak", 0.0, 3.0) is None
    assert "[starts growing: flat, flat -> grows, grows]" in said
    # a move of the figure within a verdict (growth of 40 then 60 KiB) is a change, not a start
    assert detect.turn(["grows"], ["grows"]) is None and detect.turn(["settles"], ["grows", "grows"]) == "starts growing"
    assert detect.turn(["grows", "flat"], ["grows"]) is None  # rounds that disagree: neither


def side_by_side_samples(before, after, pair, delta):
    """5 interleaved pairs of the growth per step: `after` above `before` by `delta`."""
    out = []
    for index in range(1, 6):
        for release, per_step in ((before, 0), (after, delta)):
            found = with_growth(sweep_record(release, 1), per_step + index * 100, "grows" if per_step else "flat")
            out.append(dict(found, **{confirm.PAIR_KEY: pair, confirm.INDEX_KEY: index}))
    return out


def flagged_growth(before="1.7.0", after="1.8.0", figure=detect.GROWTH):
    """A changes.json entry: the sweep flagged the growth per step rising 40 KiB a step."""
    return {"workload": "chained_dot", "mode": "eager", "figure": figure, "before_release": before,
            "release": after, "before": 0.0, "after": 40 * KIB, "delta": 40 * KIB, "direction": "up",
            "advisory": False, "before_samples": [0, 0], "after_samples": [40 * KIB] * 2}


def test_the_confirmation_judges_the_growth_with_its_own_grain_and_size_rule():
    change = flagged_growth()
    held = side_by_side_samples("1.7.0", "1.8.0", "1.7.0->1.8.0", 40 * KIB)
    document = confirm.attach({"changes": [dict(change)]}, held)
    [found] = document["changes"]
    assert found["confirmation"]["status"] == "confirmed" and found["confirmation"]["p"] == pytest.approx(1 / 252, abs=1e-5)
    assert found["actionable"]  # 40 KiB a step side by side: past the figure's own 16 KiB, not 5 % and 1 MiB
    assert "leak: 1.7.0 -> 1.8.0: side by side 0.3 KiB -> 40.3 KiB, 5 pairs" in confirm.line(found)
    assert found["confirmation"]["relative"] is None
    # 3 KiB a step apart side by side: within the figure's 4 KiB grain
    small = confirm.attach({"changes": [dict(change)]}, side_by_side_samples("1.7.0", "1.8.0", "1.7.0->1.8.0", 3 * KIB))
    assert small["changes"][0]["confirmation"]["status"] == "not confirmed"
    assert small["changes"][0]["confirmation"]["why"] == "moved 3.0 KiB, within the grain"
    # 10 KiB a step: confirmed, under the size rule's 16 KiB
    mid = confirm.attach({"changes": [dict(change)]}, side_by_side_samples("1.7.0", "1.8.0", "1.7.0->1.8.0", 10 * KIB))
    assert mid["changes"][0]["confirmation"]["status"] == "confirmed" and not mid["changes"][0]["actionable"]


def test_samples_measured_before_the_leak_phase_are_measured_again_for_it(tmp_path):
    """A pair measured side by side for its step peak before the leak phase existed: for a
    flagged growth its samples are no samples (pending, not failed), and the run measures
    the pair again; the newer samples then stand."""
    change = flagged_growth()
    older = [dict(sweep_record(release, 1), **{confirm.PAIR_KEY: "1.7.0->1.8.0", confirm.INDEX_KEY: index})
             for index in range(1, 6) for release in ("1.7.0", "1.8.0")]
    assert confirm.verdict_of(change, older)["status"] == "pending"
    out = tmp_path / "releases"
    write_jsonl(out.parent / "x.jsonl", [])
    out.mkdir()
    write_jsonl(out / "autograd.confirm.jsonl", older)
    measured = []

    def measure(cells):
        for cell in cells:
            measured.append(cell["version"])
            yield cell, leak_record(cell["version"], jitter=len(measured))

    runner = side_by_side.SideBySide(str(out), "autograd", "tiny", "float32", measure=measure, say=lambda *a, **k: None)
    assert runner.run({confirm.group_key(change): [change]}) == 10
    assert measured == ["1.7.0", "1.8.0"] * 5
    assert confirm.verdict_of(change, runner.held)["status"] == "confirmed"
    # a pair whose samples carry the figure is not measured again
    assert side_by_side.SideBySide(str(out), "autograd", "tiny", "float32", measure=measure,
                                   say=lambda *a, **k: None).run({confirm.group_key(change): [change]}) == 0


def test_the_page_marks_each_releases_verdict_on_the_growth_chart():
    sweep = [sweep_record(r, n) for r in RELEASES for n in (1, 2)]
    leak = [leak_record(r, n) for r in RELEASES for n in (1, 2)]
    leak[-1] = with_growth(leak[-1], 0, "settles")  # 1.9.0's second round settles: its rounds disagree
    document = confirm.attach(detect.report(sweep, detect.detect(sweep, leak), "autograd", {}, leak=leak), [])
    html = page.render("autograd", sweep, document, {}, {}, leak=leak)
    assert '<text x="66.0" y="19.0" text-anchor="middle" class="verdict flat">○<title>1.7.0: flat, flat</title>' in html
    assert 'class="verdict grows">▲<title>1.8.0: grows, grows</title>' in html
    assert 'class="verdict mixed">±<title>1.9.0: flat, settles</title>' in html
    assert html.count('class="verdict ') == 3  # the growth chart's alone
    assert "6 memory passes, 2 round(s) a cell, the growth per step alone read from them" in html
    # a store without the figure draws no growth chart and says nothing of it
    plain = page.render("autograd", sweep, confirm.attach(detect.report(sweep, detect.detect(sweep), "autograd", {}), []),
                        {}, {})
    assert 'class="verdict' not in plain and "growth-per-step charts" not in plain


def test_the_leak_pass_measures_what_is_missing_resumes_and_publishes(store, capsys):
    out, measurer, built = store
    assert releases(out, "--leak-pass") == 0
    # two rounds of the one cell with an ok record at each release (unet failed at 1.9.0: not planned)
    assert measurer.measured == [r for r in RELEASES for _ in (1, 2)]
    # the sweep's memory pass after the reference gradient, its leak phase given this pass's budgets
    assert measurer.reference and measurer.options.leak_budgets_s == leak_pass.BUDGETS_S
    assert not measurer.options.prediction
    held = [json.loads(line) for line in (out / "autograd.leak.jsonl").read_text().splitlines()]
    assert [(r["version"], r["release_round"]) for r in held] == [(r, n) for r in RELEASES for n in (1, 2)]
    assert all("time_samples_s" not in r for r in held)  # compacted like the store's
    said = capsys.readouterr().out
    assert "growth per step of 3 cell(s) in 3 release(s), 2 round(s) each" in said
    assert "growth per step at 1.8.0: 2 grows; grows: chained_dot eager" in said
    document = json.loads((out / "autograd.changes.json").read_text())
    growth = {(c["before_release"], c["release"]): c.get("growth") for c in document["changes"]
              if c["figure"] == detect.GROWTH}
    assert growth == {("1.7.0", "1.8.0"): "starts growing", ("1.8.0", "1.9.0"): "stops growing"}
    assert not [c for c in document["changes"] if c["figure"] != detect.GROWTH]  # the newer step peaks: no series
    assert 'class="verdict grows"' in (out / "autograd.html").read_text()
    spent = json.loads((out / "autograd.envs.json").read_text())
    assert all("leak_measure_s" in spent[r] for r in RELEASES)
    # run again: nothing measured; --repeats 3 measures the third round alone
    assert releases(out, "--leak-pass") == 0
    assert len(measurer.measured) == 6
    assert releases(out, "--leak-pass", "--repeats", "3", "--from", "1.9.0") == 0
    assert measurer.measured[6:] == ["1.9.0"]


def test_an_unavailable_release_is_recorded_and_tried_again(store, monkeypatch, capsys):
    out, measurer, built = store

    def refuse(adapter, version, **k):
        raise Unavailable(f"pip install autograd=={version} failed; the installer's last lines:\nno wheel")

    monkeypatch.setattr(envs, "for_version", refuse)
    assert releases(out, "--leak-pass", "--from", "1.9.0") == 0
    assert "autograd==1.9.0: unavailable: pip install autograd==1.9.0 failed" in capsys.readouterr().out
    held = [json.loads(line) for line in (out / "autograd.leak.jsonl").read_text().splitlines()]
    assert [(r["version"], r["status"]) for r in held] == [("1.9.0", "unavailable")]
    monkeypatch.setattr(envs, "for_version", lambda adapter, version, **k: type("Env", (), {"path": "x"})())
    assert releases(out, "--leak-pass", "--from", "1.9.0") == 0
    assert measurer.measured == ["1.9.0", "1.9.0"]


@pytest.mark.parametrize("extra, says", [
    (["--leak-pass", "--confirm"], "--leak-pass measures an existing store's growth per step: not with"),
    (["--leak-pass", "--page-only"], "--leak-pass measures an existing store's growth per step: not with"),
    (["--leak-pass", "--repeats", "0"], "--repeats and --time-repeat must be >= 1"),
])
def test_bad_input_exits_2(store, capsys, extra, says):
    out, measurer, built = store
    assert releases(out, *extra) == 2
    assert says in capsys.readouterr().err
    assert measurer.measured == [] and built == []


def test_a_store_without_records_is_one_error_line(tmp_path, capsys):
    assert releases(tmp_path / "empty", "--leak-pass") == 2
    assert "no records; run the sweep first" in capsys.readouterr().err


def test_the_leak_budgets_reach_the_worker_job(tmp_path):
    """A job without them leaves the leak phase its share of the pass (worker.py reads
    `leak_budgets_s` first); the leak-only pass's reach the job as given."""
    [cell] = cells.expand(["chained_dot"], ["reference"], ["tiny"], ["float32"], ["cpu"], ["eager"])
    assert "leak_budgets_s" not in CellRunner(str(tmp_path), Options()).start(1, cell).job
    given = CellRunner(str(tmp_path), Options(leak_budgets_s=leak_pass.BUDGETS_S)).start(1, cell).job
    assert given["leak_budgets_s"] == list(leak_pass.BUDGETS_S)


def test_a_flagged_growth_is_measured_side_by_side_with_the_leak_pass_budgets(tmp_path, monkeypatch):
    made = []

    def passes(options, reference):
        made.append(options)
        return type("Passes", (), {"run": staticmethod(Measurer()), "close": lambda self: None})()

    monkeypatch.setattr(side_by_side, "MemoryPasses", passes)
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", say=lambda *a, **k: None)
    growth, peak = flagged_growth(), flagged_growth("1.8.0", "1.9.0", figure="step_peak")
    assert runner.run({confirm.group_key(peak): [peak], confirm.group_key(growth): [growth]}) == 20
    # one set of passes per kind: the step peak's with the sweep's share, the growth's with its own
    assert [o.leak_budgets_s for o in made] == [None, detect.GROWTH_BUDGETS_S]
