"""A flagged change is listed only when the side-by-side re-measure holds it.

The store is planted (tests/report/report_fixtures.py records, no environment built, no
network): its 2-round sweep flags two changes. The re-measure is a fake measurer
standing in for the memory passes, whose figures drift with the time of measuring as
a loaded machine's do: the sweep measured 1.7.0's rounds, then 1.8.0's, so the drift
alone made 1.8.0 look 0.5 MiB higher; interleaved, the drift falls on both releases
alike and the flat pair is not confirmed, while 1.9.0's real +8 MiB is."""

import json
import os
import sys

import pytest

from harness import cli
from harness.releases import confirm, detect, page, side_by_side

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from report_fixtures import MIB, fixture_record, write_jsonl  # noqa: E402

DRIFT = 100 * 1024  # bytes the figure rises per measurement (the machine's load creeping up)
REAL = {"1.7.0": 0, "1.8.0": 0, "1.9.0": 8 * MIB}  # what each release really adds to the step peak


def record(release, peak, **extra):
    found = fixture_record("chained_dot", "autograd", version=release,
                           peak_bytes={"forward": 4 * MIB, "backward": peak, "total": peak}, **extra)
    found["provenance"]["versions"]["autograd"] = release
    return found


def planted_sweep():
    """2 rounds a release, the releases one after another under the drift: the detector
    flags 1.7.0 -> 1.8.0 (rounds 6.00, 6.10 then 6.50, 6.60 MiB: apart by more than
    the grain) and 1.8.0 -> 1.9.0 (+8 MiB)."""
    out, clock = [], 0
    for release in REAL:
        for number in (1, 2):
            out.append(dict(record(release, 6 * MIB + REAL[release] + clock * DRIFT), release_round=number))
            clock += 1
        clock += 3  # the next release's environment is built in between
    return out


class Passes:
    """Stands in for MemoryPasses (harness/sweep/memory_passes.py): `measure` measures."""

    def __init__(self, measure):
        self.run = measure

    def close(self):
        pass


class DriftingMeasurer:
    """measure(cells) -> (cell, record): the release's real figure plus the drift so far."""

    def __init__(self):
        self.clock = 0
        self.measured = []

    def __call__(self, cells):
        for cell in cells:
            self.measured.append(cell["version"])
            yield cell, record(cell["version"], 6 * MIB + REAL[cell["version"]] + self.clock * DRIFT)
            self.clock += 1


@pytest.fixture
def store(tmp_path, monkeypatch):
    out = tmp_path / "releases"
    out.mkdir()
    write_jsonl(out / "autograd.jsonl", planted_sweep())
    (out / "autograd.envs.json").write_text(json.dumps({r: {"versions": {"autograd": r}} for r in REAL}))
    measurer = DriftingMeasurer()
    monkeypatch.setattr(side_by_side, "MemoryPasses", lambda options, reference: Passes(measurer))
    return out, measurer


def confirm_store(out, *extra):
    return cli.main(["releases", "--framework", "autograd", "--out", str(out), "--confirm", *extra])


def flagged(out, figure="step_peak"):
    document = json.loads((out / "autograd.changes.json").read_text())
    return {(c["before_release"], c["release"]): c for c in document["changes"] if c["figure"] == figure}, document


def test_the_sweep_flags_both_before_confirmation(store):
    out, measurer = store
    assert cli.main(["releases", "--framework", "autograd", "--out", str(out), "--page-only"]) == 0
    changes, document = flagged(out)
    assert set(changes) == {("1.7.0", "1.8.0"), ("1.8.0", "1.9.0")}  # the drift passed for a change
    assert {c["confirmation"]["status"] for c in changes.values()} == {"pending"}
    assert measurer.measured == []


def test_a_drifted_flat_pair_is_not_confirmed_and_a_real_change_is(store, capsys):
    out, measurer = store
    assert confirm_store(out) == 0
    # interleaved in one run: A B A B ..., 5 pairs for each flagged release pair
    assert measurer.measured == ["1.7.0", "1.8.0"] * 5 + ["1.8.0", "1.9.0"] * 5
    changes, document = flagged(out)
    flat, real = changes[("1.7.0", "1.8.0")]["confirmation"], changes[("1.8.0", "1.9.0")]["confirmation"]
    # side by side each B was measured one step after its A: 100 KiB of drift, under the grain
    assert flat["status"] == "not confirmed" and flat["delta"] == DRIFT and flat["pairs"] == 5
    assert "within the grain" in flat["why"]
    # the real change: every 1.9.0 sample above every 1.8.0 one (p = 1/252), +8 MiB + one drift step
    assert real["status"] == "confirmed" and real["delta"] == 8 * MIB + DRIFT and real["p"] == pytest.approx(1 / 252, abs=1e-5)
    assert changes[("1.8.0", "1.9.0")]["actionable"]  # +8 MiB on 6 MiB: past 5 % and 1 MiB
    assert not changes[("1.7.0", "1.8.0")]["actionable"]
    assert document["tally"]["step_peak"] == {"flagged": 2, "confirmed": 1, "not confirmed": 1, "pending": 0,
                                              "failed": 0, "advisory": 0, "actionable": 1}
    said = capsys.readouterr().out
    assert "step_peak: flagged 2, confirmed 1 (1 actionable), not confirmed 1" in said
    # the page leads with the one actionable change; the rejected one is folded, its ring gone
    page = (out / "autograd.html").read_text()
    lead = page.index("Confirmed changes a user would act on (1)")
    assert lead < page.index("chained_dot eager step_peak: 1.8.0 -&gt; 1.9.0: side by side") < page.index("<details>")
    assert "Not confirmed: flagged by the sweep&#x27;s rounds, not held side by side (3)" in page
    # a red ring per confirmed change, none for the rejected ones (nor a grey "flagged" one)
    assert page.count('<circle class="change"') == len([c for c in document["changes"]
                                                         if c["confirmation"]["status"] == "confirmed"]) == 3
    assert page.count('<circle class="flagged"') == 0
    # the store keeps the confirmation's samples, tagged with their pair
    held = [json.loads(line) for line in (out / "autograd.confirm.jsonl").read_text().splitlines()]
    assert [(r["confirm_pair"], r["confirm_index"], r["version"]) for r in held[:4]] == [
        ("1.7.0->1.8.0", 1, "1.7.0"), ("1.7.0->1.8.0", 1, "1.8.0"), ("1.7.0->1.8.0", 2, "1.7.0"),
        ("1.7.0->1.8.0", 2, "1.8.0")]


def test_confirm_resumes_and_more_pairs_adds_to_those_held(store):
    out, measurer = store
    assert confirm_store(out, "--workload", "chained_dot", "--from", "1.8.0") == 0
    assert measurer.measured == ["1.8.0", "1.9.0"] * 5  # --from narrows to the pairs from 1.8.0 on
    assert confirm_store(out, "--from", "1.8.0") == 0
    assert measurer.measured == ["1.8.0", "1.9.0"] * 5  # held: nothing measured again
    assert confirm_store(out, "--from", "1.8.0", "--pairs", "7", "--max-pairs", "7") == 0
    assert measurer.measured == ["1.8.0", "1.9.0"] * 7
    changes, _ = flagged(out)
    assert changes[("1.8.0", "1.9.0")]["confirmation"]["pairs"] == 7
    assert changes[("1.7.0", "1.8.0")]["confirmation"]["status"] == "pending"


def test_scope_large_confirms_only_changes_past_the_size_rule(store):
    out, measurer = store
    assert confirm_store(out, "--confirm-scope", "large") == 0
    assert measurer.measured == ["1.8.0", "1.9.0"] * 5  # the 0.5 MiB flagged move is under 1 MiB


@pytest.mark.parametrize("extra, says", [
    (["--confirm-scope", "some"], "unknown confirm scope 'some'"),
    (["--pairs", "4"], "--pairs must be >= 5 (fewer pairs can never give p <= 0.01)"),
    (["--pairs", "6", "--max-pairs", "5"], "--max-pairs >= --pairs"),
    (["--page-only"], "--confirm measures an existing store's flagged changes"),
    (["--measure-again", "stale"], "--measure-again withdraws the samples of the pairs named: name them with"),
    (["--from", "1.8.0", "--measure-again", " "], "--measure-again needs a reason"),
])
def test_bad_confirm_options_exit_2(store, capsys, extra, says):
    out, measurer = store
    assert confirm_store(out, *extra) == 2
    assert says in capsys.readouterr().err and measurer.measured == []


def test_measure_again_is_refused_without_confirm_or_resume(store, capsys):
    out, measurer = store
    assert cli.main(["releases", "--framework", "autograd", "--out", str(out), "--from", "1.8.0",
                     "--measure-again", "stale"]) == 2
    said = capsys.readouterr().err
    assert "--measure-again withdraws what a store holds and measures it anew: with --confirm" in said
    assert "with --resume the sweep's records of the releases named" in said


def test_measure_again_withdraws_the_named_pairs_samples_keeps_them_and_measures_anew(store, capsys):
    out, measurer = store
    assert confirm_store(out) == 0
    path = out / "autograd.confirm.jsonl"
    with path.open("a") as handle:
        handle.write("not a record\n")  # a damaged line is no sample of anyone's: it stays as it is
    before = path.read_text().splitlines(keepends=True)
    assert confirm_store(out, "--from", "1.8.0", "--measure-again", "planted: a broken environment") == 0
    # the named pair measured anew, 5 pairs; the other pair's samples held, nothing measured
    assert measurer.measured == ["1.7.0", "1.8.0"] * 5 + ["1.8.0", "1.9.0"] * 5 * 2
    assert "10 sample(s) of 1 release pair(s) withdrawn to" in capsys.readouterr().out
    withdrawn = [json.loads(line) for line in (out / "autograd.confirm.withdrawn.jsonl").read_text().splitlines()]
    assert len(withdrawn) == 10 and {r["confirm_pair"] for r in withdrawn} == {"1.8.0->1.9.0"}
    assert {r["withdrawn"]["reason"] for r in withdrawn} == {"planted: a broken environment"}
    # every withdrawn sample is one the store held, as it was there
    assert [{k: v for k, v in r.items() if k != "withdrawn"} for r in withdrawn] == [
        json.loads(line) for line in before if "1.8.0->1.9.0" in line]
    after = path.read_text().splitlines(keepends=True)
    kept = [line for line in before if "1.8.0->1.9.0" not in line]
    assert after[:len(kept)] == kept  # the other pair's lines and the damaged one, byte for byte
    assert len(after) == len(kept) + 10
    assert all(json.loads(line)["confirm_pair"] == "1.8.0->1.9.0" for line in after[len(kept):])
    changes, _ = flagged(out)
    real = changes[("1.8.0", "1.9.0")]["confirmation"]
    assert real["status"] == "confirmed" and real["pairs"] == 5  # from the new samples alone
    # and it says it was measured again, why, and how many samples went
    assert real["measured_again"]["withdrawn"] == 10
    assert real["measured_again"]["reason"] == "planted: a broken environment"
    assert "measured again" not in json.dumps(changes[("1.7.0", "1.8.0")]["confirmation"])
    assert "(10 earlier samples withdrawn: planted: a broken environment)" in confirm.line(changes[("1.8.0", "1.9.0")])
    assert "10 earlier samples withdrawn: planted: a broken environment" in (out / "autograd.html").read_text()


def test_the_rank_sum_test_is_exact():
    # complete separation of 5 and 5: one split of the 252 is as extreme
    assert confirm.rank_sum_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(1 / 252)
    assert confirm.rank_sum_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == 1.0  # the other way: no evidence of "up"
    assert confirm.rank_sum_p([3] * 5, [3] * 5) == 1.0  # all tied: every split gives the same sum
    # one swap (a 5.5 among the B's): 2 splits of 252 at least as extreme
    assert confirm.rank_sum_p([1, 2, 3, 4, 6], [5, 7, 8, 9, 10]) == pytest.approx(2 / 252)


def test_a_move_the_other_way_side_by_side_is_not_confirmed():
    verdict = confirm.judge([10 * MIB] * 5, [8 * MIB] * 5, "step_peak", "up")
    assert verdict["status"] == "not confirmed" and verdict["why"] == "moved the other way side by side"
    assert confirm.judge([1.0, 1.1, 1.2], [5.0], "step_peak", "up")["status"] == "failed"
    assert detect.FIGURES["time"] == "seconds"  # time is never confirmed: the verdict says advisory
    assert confirm.verdict_of({"advisory": True}, [])["status"] == "advisory"


def test_a_noisy_flat_pair_overlaps_and_is_not_confirmed():
    # JAX eager tiny_nerf's step peak, as two sweeps of one commit read it (23.25 and 24.96 MiB):
    # scatter beyond the grain, the same for both releases, so their samples interleave
    a = [23.25 * MIB, 24.96 * MIB, 23.90 * MIB, 24.50 * MIB, 23.40 * MIB]
    b = [24.30 * MIB, 23.30 * MIB, 24.90 * MIB, 23.60 * MIB, 24.45 * MIB]  # median +0.4 MiB
    verdict = confirm.judge(a, b, "step_peak", "up")
    assert verdict["status"] == "not confirmed" and verdict["why"].startswith("the samples overlap")
    assert verdict["p"] > 0.1 and not confirm.undecided(verdict)


def test_a_separated_move_within_the_grain_is_not_confirmed():
    # every B sample above every A one (p = 1/252), but by 100 KiB: under the RSS grain
    # (13 processes of one cell spread by 232 KiB), so no test of ranks makes it a change
    a = [30 * MIB + k * 1024 for k in range(5)]
    b = [30 * MIB + 100 * 1024 + k * 1024 for k in range(5)]
    verdict = confirm.judge(a, b, "step_peak", "up")
    assert verdict["p"] == pytest.approx(1 / 252, abs=1e-5)
    assert verdict["status"] == "not confirmed" and "within the grain" in verdict["why"]
    assert confirm.judge(a, [x + 300 * 1024 for x in a], "step_peak", "up")["status"] == "confirmed"


def test_an_undecided_figure_is_measured_on_to_max_pairs(tmp_path):
    """A real 1.5 MiB move under 1-2 MiB of scatter: five pairs overlap (p = 0.07), ten settle it."""
    noise_a = [0, 2, 1, 3, 0.5, 1, 0, 2, 0.5, 1.5]
    noise_b = [2, 1.5, 3, 4, 2.5, 3, 3.5, 2, 4, 3]
    seen = {"1.8.0": iter(noise_a), "1.9.0": iter(noise_b)}

    def measure(cells):
        for cell in cells:
            yield cell, record(cell["version"], int(20 * MIB + next(seen[cell["version"]]) * MIB))

    change = {"workload": "chained_dot", "mode": "eager", "figure": "step_peak", "before_release": "1.8.0",
              "release": "1.9.0", "before": 21 * MIB, "after": 23 * MIB, "delta": 2 * MIB, "direction": "up",
              "advisory": False, "before_samples": [0, 0], "after_samples": [0, 0]}
    said = []
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", measure=measure,
                                     say=lambda *a, **k: said.append(a[0]))
    assert runner.run({confirm.group_key(change): [change]}, pairs=5, max_pairs=10) == 20
    verdict = confirm.verdict_of(change, runner.held)
    assert verdict["status"] == "confirmed" and verdict["pairs"] == 10 and verdict["p"] < 0.001
    assert said and said[0].endswith(": confirmed")


def test_the_real_memory_passes_measure_as_the_sweep_does():
    """The side-by-side runner's pass is the sweep's memory pass: a fresh worker after the
    workload's reference gradient (the gradient check runs inside it), no time pass.
    The installed autograd stands in for a release (no environment built)."""
    from harness.sweep import cells
    from harness.sweep.cell_runner import Options

    [cell] = cells.expand(["chained_dot"], [("autograd", None)], ["tiny"], ["float32"], ["cpu"], ["eager"])
    with side_by_side.MemoryPasses(Options(timeout_s=300, prediction=False), reference=True) as passes:
        found = [record for _, record in passes.run([cell, cell])]
    assert [r["status"] for r in found] == ["ok", "ok"], [r.get("message") for r in found]
    for r in found:
        assert r["provenance"]["reference_gradient"].startswith("reference engine")  # checked, as in the sweep
        assert r["grad_rel_err"] is not None and r["grad_rel_err"] < 1e-3
        assert r["time_s"] is None  # no time pass
        assert r["peak_bytes"]["total"] > 0
    # two fresh workers of one cell: a deterministic engine repeats within the 256 KiB grain
    assert abs(found[0]["peak_bytes"]["total"] - found[1]["peak_bytes"]["total"]) <= detect.GRAIN_BYTES


def test_an_unavailable_release_stops_its_pair_and_is_measured_again_later(tmp_path):
    change = {"workload": "chained_dot", "mode": "eager", "figure": "step_peak", "before_release": "1.8.0",
              "release": "1.9.0", "before": 6 * MIB, "after": 14 * MIB, "delta": 8 * MIB, "direction": "up",
              "advisory": False, "before_samples": [0, 0], "after_samples": [0, 0]}
    installable = {"now": False}

    def measure(cells):
        for cell in cells:
            if cell["version"] == "1.8.0" and not installable["now"]:
                yield cell, dict(record(cell["version"], 0), status="unavailable", message="requires Python >=3.99")
            else:
                yield cell, record(cell["version"], 6 * MIB + REAL.get(cell["version"], 0))

    groups = {confirm.group_key(change): [change]}
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", measure=measure,
                                     say=lambda *a, **k: None)
    assert runner.run(groups) == 1  # the first sample was unavailable: the pair's other nine are not tried
    assert confirm.verdict_of(change, runner.held)["status"] == "failed"
    installable["now"] = True  # the host gained the Python: a later run measures the pair
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", measure=measure,
                                     say=lambda *a, **k: None)
    assert runner.run(groups) == 10  # every pair whole again: 1.8.0 and 1.9.0 side by side
    verdict = confirm.verdict_of(change, runner.held)
    assert verdict["status"] == "confirmed" and verdict["pairs"] == 5


def test_torch_confirm_builds_pruned_releases_from_the_index_named(tmp_path, monkeypatch):
    """The sweep prunes each torch environment after its release; the side-by-side run
    must build them again from the index `--torch-index` names, as the sweep did
    (envs.for_version refuses a torch release from no index: every sample would be
    `unavailable`)."""
    out = tmp_path / "releases"
    out.mkdir()
    planted = []
    for release, peak in (("2.5.1", 33 * MIB), ("2.6.0", 4 * MIB)):
        for number in (1, 2):
            found = fixture_record("shared_linear", "torch", version=release, mode="compiled", release_round=number,
                                   peak_bytes={"forward": MIB, "backward": peak + number * 1024, "total": peak + number * 1024})
            found["provenance"]["versions"]["torch"] = release
            planted.append(found)
    write_jsonl(out / "torch.jsonl", planted)
    (out / "torch.envs.json").write_text(json.dumps({r: {"versions": {"torch": r}} for r in ("2.5.1", "2.6.0")}))
    seen = []

    def passes(options, reference):
        seen.append(options.torch_index)
        return Passes(lambda cells: ((cell, dict(planted[0] if cell["version"] == "2.5.1" else planted[2],
                                                 version=cell["version"])) for cell in cells))

    monkeypatch.setattr(side_by_side, "MemoryPasses", passes)
    assert cli.main(["releases", "--framework", "torch", "--out", str(out), "--confirm", "--mode", "compiled",
                     "--torch-index", "pypi"]) == 0
    assert seen == ["pypi"]  # the measuring workers may build a release from it
    document = json.loads((out / "torch.changes.json").read_text())
    [drop] = [c for c in document["changes"] if c["figure"] == "step_peak"]
    assert drop["confirmation"]["status"] == "confirmed" and drop["confirmation"]["delta"] == -29 * MIB


def test_a_stopped_run_leaves_its_pair_pending_and_the_next_run_finishes_it(tmp_path):
    """Two pairs measured, then the run stopped: not a verdict (fewer than five pairs can
    never reach p <= 0.01), so the change stays pending, and the next run measures the
    other three pairs only."""
    change = {"workload": "chained_dot", "mode": "eager", "figure": "step_peak", "before_release": "1.8.0",
              "release": "1.9.0", "before": 6 * MIB, "after": 14 * MIB, "delta": 8 * MIB, "direction": "up",
              "advisory": False, "before_samples": [0, 0], "after_samples": [0, 0]}
    stop_after = {"samples": 4}

    def measure(cells):
        for cell in cells:
            if stop_after["samples"] == 0:
                raise KeyboardInterrupt  # what SIGTERM does to a run (interrupts.handling)
            stop_after["samples"] -= 1
            yield cell, record(cell["version"], 6 * MIB + REAL[cell["version"]])

    groups = {confirm.group_key(change): [change]}
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", measure=measure,
                                     say=lambda *a, **k: None)
    with pytest.raises(KeyboardInterrupt):
        runner.run(groups)
    verdict = confirm.verdict_of(change, runner.held)
    assert verdict["status"] == "pending" and verdict["pairs"] == 2 and "measured in part" in verdict["why"]
    stop_after["samples"] = 100
    runner = side_by_side.SideBySide(str(tmp_path), "autograd", "tiny", "float32", measure=measure,
                                     say=lambda *a, **k: None)
    assert runner.run(groups) == 6  # pairs 3-5 only
    assert confirm.verdict_of(change, runner.held)["status"] == "confirmed"


def test_a_second_confirm_run_of_one_store_is_refused_naming_the_first(store, capsys):
    """Two runs would measure the same pairs twice, each one's samples replacing the
    other's; the first run's lock (held here through its own open file) refuses the second."""
    import fcntl

    out, measurer = store
    with open(f"{side_by_side.store.confirm_path(str(out), 'autograd')}.run.lock", "a+") as first:
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first.write("pid 4242, since 2026-11-27T06:00:00\n")
        first.flush()
        assert confirm_store(out) == 2
        fcntl.flock(first, fcntl.LOCK_UN)
    said = capsys.readouterr().err
    assert "another `harness releases --confirm` run is measuring this store (pid 4242" in said
    assert measurer.measured == []  # nothing measured twice
    assert confirm_store(out) == 0  # the first run gone, the store is measured
    assert measurer.measured


def _sample(release, peak, label, index):
    return dict(record(release, peak), **{confirm.PAIR_KEY: label, confirm.INDEX_KEY: index})


def _flagged_rise(before, after):
    """A changes.json entry: the sweep flagged chained_dot's step peak rising 8 MiB."""
    return {"workload": "chained_dot", "mode": "eager", "figure": "step_peak", "before_release": before,
            "release": after, "before": 6 * MIB, "after": 14 * MIB, "delta": 8 * MIB, "direction": "up",
            "advisory": False, "before_samples": [6 * MIB] * 2, "after_samples": [14 * MIB] * 2}


def test_a_change_inside_a_wider_confirmed_pair_carries_its_verdict_saying_so():
    """1.7.0 -> 1.9.0 was confirmed side by side before 1.8.0 was swept; the sweep now
    flags the move at 1.8.0 -> 1.9.0 alone. The wider pair's verdict holds for it, named;
    a second flagged move of the series inside the wider pair makes it ambiguous: pending."""
    change = _flagged_rise
    wider = [_sample(release, 6 * MIB + REAL[release] + i * 1024, "1.7.0->1.9.0", i)
             for i in range(1, 6) for release in ("1.7.0", "1.9.0")]
    moved = change("1.8.0", "1.9.0")
    document = confirm.attach({"changes": [moved]}, wider)
    found = moved["confirmation"]
    assert found["status"] == "confirmed" and found["across"] == ["1.7.0", "1.9.0"] and moved["actionable"]
    assert "side by side across 1.7.0 -> 1.9.0 (a wider pair" in confirm.line(moved)
    assert side_by_side.wanted(document) == {}  # --confirm leaves it: it has its verdict
    # another flagged move of the same series inside 1.7.0 -> 1.9.0: which one moved is not known
    moved, drift = change("1.8.0", "1.9.0"), change("1.7.0", "1.8.0")
    confirm.attach({"changes": [drift, moved]}, wider)
    assert moved["confirmation"]["status"] == "pending" and drift["confirmation"]["status"] == "pending"
    # a wider pair that did not move decides nothing (a move and one back could cancel)
    flat = [_sample(release, 6 * MIB + i * 1024, "1.7.0->1.9.0", i) for i in range(1, 6) for release in ("1.7.0", "1.9.0")]
    moved = change("1.8.0", "1.9.0")
    confirm.attach({"changes": [moved]}, flat)
    assert moved["confirmation"]["status"] == "pending"
    # a pair measured side by side of its own is judged on its own samples, never across
    own = [_sample(release, 6 * MIB + (0 if release == "1.8.0" else 8 * MIB), "1.8.0->1.9.0", i)
           for i in range(1, 6) for release in ("1.8.0", "1.9.0")]
    moved = change("1.8.0", "1.9.0")
    confirm.attach({"changes": [moved]}, wider + own)
    assert moved["confirmation"]["status"] == "confirmed" and "across" not in moved["confirmation"]


def test_a_verdict_whose_pairs_span_two_machines_says_so():
    """A run stopped part-way and finished on another box pools pairs measured apart:
    the verdict names the machines (each pair is still side by side); one machine, no note."""
    change = _flagged_rise("1.8.0", "1.9.0")
    samples = [_sample(release, 6 * MIB + REAL[release] + i * 1024, "1.8.0->1.9.0", i)
               for i in range(1, 6) for release in ("1.8.0", "1.9.0")]
    confirm.attach({"changes": [change]}, samples)
    assert change["confirmation"]["status"] == "confirmed" and "machines" not in change["confirmation"]
    assert "machines" not in confirm.line(change)
    for sample in samples:  # pairs 4 and 5 measured on a new box (another kernel build)
        machine = sample["provenance"].setdefault("machine", {})
        machine["platform"] = "Linux-6.18-v595" if sample[confirm.INDEX_KEY] > 3 else "Linux-6.18-v657"
    confirm.attach({"changes": [change]}, samples)
    assert change["confirmation"]["machines"] == ["Linux-6.18-v595", "Linux-6.18-v657"]
    assert "(its pairs from 2 machines: Linux-6.18-v595, Linux-6.18-v657)" in confirm.line(change)
    assert "its pairs from 2 machines: Linux-6.18-v595, Linux-6.18-v657" in page._side_by_side(change)
