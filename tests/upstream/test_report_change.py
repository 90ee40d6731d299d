"""`harness report-change` on a small store: a bad id, an environment that cannot be
built and a script that fails are one clear line each, recorded, nothing else lost; a
run that moves as the harness did is "reproduced standalone" on the draft."""

import json
import os
import sys

import pytest

from harness import cli
from harness.frameworks.base import Unavailable
from harness.upstream import control, runner, script, store

from harness.units import MIB
ID = "torch:chained_dot:eager:retained:2.3.1->2.4.0"


def _store(tmp_path):
    out = tmp_path / "releases"
    out.mkdir()
    change = {"workload": "chained_dot", "mode": "eager", "figure": "retained", "before_release": "2.3.1",
              "release": "2.4.0", "before": 10 * MIB, "after": 16 * MIB, "delta": 6 * MIB, "relative": 0.6,
              "direction": "up", "worse": True, "band": MIB // 4, "before_samples": [10 * MIB] * 3,
              "after_samples": [16 * MIB] * 3, "advisory": False, "parts": {}, "dependencies_differ": {},
              "command": "python -m harness bisect ...", "unmeasured_between": [], "actionable": True,
              "confirmation": {"status": "confirmed", "before": 10 * MIB, "after": 16 * MIB, "delta": 6 * MIB,
                               "relative": 0.6, "p": 0.00397, "pairs": 5, "before_samples": [10 * MIB] * 5,
                               "after_samples": [16 * MIB] * 5}}
    (out / "torch.changes.json").write_text(json.dumps({"framework": "torch", "changes": [change], "flat": []}))
    (out / "torch.envs.json").write_text(json.dumps({r: {"versions": {"torch": r, "numpy": "2.4.6"}}
                                                     for r in ("2.3.1", "2.4.0")}))
    return out


def _main(*argv):
    return cli.main(["report-change", *argv])


def test_a_bad_id_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = _store(tmp_path)
    assert _main("torch:chained_dot:eager:retained:2.3.1->9.9", "--out", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no change") and "2.3.1->2.4.0" in err[0]
    assert _main("nonsense", "--out", str(out)) == 2
    assert _main("pytensor:chained_dot:eager:retained:1->2", "--out", str(out)) == 2
    assert "written for torch, jax, tensorflow" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["torch.changes.json", "torch.envs.json"]


def test_write_only_writes_the_script_and_the_draft(tmp_path, capsys):
    out = _store(tmp_path)
    assert _main(ID, "--out", str(out), "--write-only") == 0
    folder = out / "upstream" / "torch"
    name = "torch-chained_dot-eager-2.3.1-to-2.4.0"
    text = (folder / f"{name}.py").read_text()
    compile(text, name, "exec")
    assert "import torch" in text and "harness" not in text.split('"""', 2)[2]  # the code imports no gradmem
    draft = (folder / f"{name}.md").read_text()
    assert draft.startswith("# torch 2.4.0: retained of an eager autograd training step rises by 6.00 MiB")
    assert f"`{ID}`" in draft and f"[{name}.py]({name}.py)" in draft and "not run standalone yet" in draft


def test_an_environment_that_cannot_be_built_is_recorded_in_one_line(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)

    def unavailable(framework, release, torch_index=None):
        raise Unavailable(f"pip install torch==={release} failed (exit 1); the installer's last lines:\nno network")

    monkeypatch.setattr(runner, "environment", unavailable)
    assert _main(ID, "--out", str(out)) == 3
    said = [line for line in capsys.readouterr().out.splitlines() if ID in line]
    assert said == [f"  {ID}: not run standalone: an environment could not be built: torch==2.3.1: pip install "
                    "torch===2.3.1 failed (exit 1); the installer's last lines:"]
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert outcome["status"] == "unavailable" and (out / "upstream" / "torch").is_dir()


class _Env:
    def __init__(self, python):
        self.python = python


def _fake_pythons(tmp_path, monkeypatch, body):
    """Each release's 'environment' is this interpreter behind a link of its own; the
    script is `body` (it can tell the releases apart by sys.executable)."""
    pythons = {}
    for release in ("2.3.1", "2.4.0"):
        folder = tmp_path / "envs" / f"torch-{release}" / "bin"
        folder.mkdir(parents=True)
        os.symlink(sys.executable, folder / "python")
        pythons[release] = str(folder / "python")
    monkeypatch.setattr(runner, "environment", lambda framework, release, torch_index=None: _Env(pythons[release]))
    monkeypatch.setattr(script, "write", lambda spec: body)
    # gradmem's own pass beside a script that did not reproduce: none here unless a test gives one
    monkeypatch.setattr(control, "run_group", lambda *args, **kwargs: {})


def test_a_script_that_fails_is_recorded_with_its_last_words(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    _fake_pythons(tmp_path, monkeypatch, "import sys\nsys.exit('the step raised: out of luck')\n")
    assert _main(ID, "--out", str(out), "--runs", "2") == 3
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert outcome["status"] == "failed" and outcome["why"] == "0 ok run(s) on a side; 2 needed"
    assert outcome["messages"][-1] == "exit 1: the step raised: out of luck"
    runs = store.read_samples(str(out), "torch")
    assert len(runs) == 4 and {r["status"] for r in runs} == {"failed"}
    assert f"{ID}: standalone script failed" in capsys.readouterr().out


FAKE = '''import json, sys
after = "torch-2.4.0" in sys.executable
mib = 2 ** 20
figures = {"retained": (15.0 if after else 10.2) * mib, "step_peak": 5 * mib}
print(json.dumps({"figures": figures, "figure": "retained", "versions": {"torch": "x"}, "python": "3",
                  "platform": "p", "modules": ["numpy", "torch"], "environment": {}, "steady_samples": []}))
'''


def test_a_move_the_script_shows_too_is_reproduced_standalone_and_resumes(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    _fake_pythons(tmp_path, monkeypatch, FAKE)
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert outcome["status"] == "reproduced" and abs(outcome["delta"] - 4.8 * MIB) < 1
    draft = (out / "upstream" / "torch" / "torch-chained_dot-eager-2.3.1-to-2.4.0.md").read_text()
    assert "**reproduced standalone**" in draft and "| 10.20 MiB | 15.00 MiB | +4.80 MiB, 80% of gradmem's |" in draft
    # a second run finds every run held for this script: nothing is measured again
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    assert len(store.read_samples(str(out), "torch")) == 4


def test_a_store_runs_cheapest_first_and_goes_on_where_it_stopped(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    document = json.loads((out / "torch.changes.json").read_text())
    second = dict(document["changes"][0], before_release="2.4.0", release="2.5.0")
    document["changes"].append(second)
    (out / "torch.changes.json").write_text(json.dumps(document))
    _fake_pythons(tmp_path, monkeypatch, FAKE)
    for release in ("2.5.0",):
        folder = tmp_path / "envs" / f"torch-{release}" / "bin"
        folder.mkdir(parents=True)
        os.symlink(sys.executable, folder / "python")
    monkeypatch.setattr(runner, "environment", lambda framework, release, torch_index=None: _Env(
        str(tmp_path / "envs" / f"torch-{release}" / "bin" / "python")))
    # 2.5.0 is built already, 2.3.1 is not: the pair 2.4.0 -> 2.5.0 costs less and runs first
    from harness.upstream import report_change
    monkeypatch.setattr(report_change, "cached", lambda framework, release: release in ("2.4.0", "2.5.0"))
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2", "--limit", "1") == 0
    said = capsys.readouterr().out
    assert "[1/2] torch:chained_dot:eager:2.4.0->2.5.0" in said and "2.3.1->2.4.0" not in said
    assert "1 of 2 actionable changes run standalone" in said
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    said = capsys.readouterr().out
    assert "2.3.1->2.4.0: reproduced standalone" in said and "(this run: 1 group(s), 1 already judged)" in said
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    assert "(this run: 0 group(s), 2 already judged)" in capsys.readouterr().out


def test_where_the_script_does_not_move_gradmems_own_pass_beside_it_decides(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    flat = FAKE.replace("15.0 if after else 10.2", "10.1 if after else 10.2")  # the script shows no move
    _fake_pythons(tmp_path, monkeypatch, flat)
    asked = []

    def harness_today(out_, framework, group, workload, mode, size, releases, runs, **kwargs):
        asked.append((group, workload, mode, size, releases, runs))
        return {"2.3.1": {i: {"status": "ok", "figures": {"retained": 10.0 * MIB}} for i in (1, 2)},
                "2.4.0": {i: {"status": "ok", "figures": {"retained": 10.1 * MIB}} for i in (1, 2)}}

    monkeypatch.setattr(control, "run_group", harness_today)
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    assert asked == [("torch:chained_dot:eager:2.3.1->2.4.0", "chained_dot", "eager", "small", ("2.3.1", "2.4.0"), 2)]
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert outcome["status"] == "not reproduced here" and outcome["control"]["after_samples"] == [10.1 * MIB] * 2
    # the machines: this one, against the side-by-side samples' (none held in this store)
    assert outcome["why"].endswith(f"; confirmed on another machine, run here on {runner.machine()}")
    assert f"{ID}: not reproduced here, by gradmem either" in capsys.readouterr().out
    # --no-control: the script's verdict alone, and a later run with the control adds it
    (tmp_path / "again").mkdir()
    out2 = _store(tmp_path / "again")
    assert _main(ID, "--out", str(out2), "--runs", "2", "--no-control") == 0
    assert store.read_outcomes(str(out2), "torch")["changes"][ID]["status"] == "harness only"


def test_rejudge_judges_again_from_the_runs_held_measuring_nothing(tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    _fake_pythons(tmp_path, monkeypatch, FAKE)
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    first = store.read_outcomes(str(out), "torch")["changes"][ID]
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    monkeypatch.setattr(runner, "environment", lambda *a, **k: pytest.fail("an environment built for nothing"))
    assert _main("--framework", "torch", "--actionable", "--rejudge", "--out", str(out), "--runs", "2") == 0
    again = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert again["status"] == first["status"] == "reproduced" and again["before_samples"] == first["before_samples"]
    assert _main(ID, "--rejudge", "--out", str(out)) == 2
    assert "go with --framework F --actionable" in capsys.readouterr().err


def test_the_draft_names_a_checkouts_store_as_its_readme_commands_do(tmp_path):
    """A store run into from elsewhere (a worktree's process writing the checkout's
    `releases/`) is named `releases` in the draft's commands, not by this host's path;
    any other directory as given."""
    from harness.upstream.report_change import _as_named

    checkout = tmp_path / "checkout"
    (checkout / "harness" / "upstream").mkdir(parents=True)
    assert _as_named(str(checkout / "releases")) == "releases"
    elsewhere = str(tmp_path / "mine" / "releases")
    assert _as_named(elsewhere) == elsewhere
    assert _as_named(str(tmp_path / "store")) == str(tmp_path / "store")


def test_a_draft_whose_change_is_withdrawn_says_so_when_written_again(tmp_path, capsys, monkeypatch):
    """A group run while its change was actionable, whose change the store judged again
    (measured side by side again, it did not hold): `--write-only` over the store writes
    its draft again saying it is withdrawn, beside its script as run (not rewritten: its
    runs are that script's); the site's list says so too, and the tally leaves it out."""
    from harness.site import upstream as site_upstream

    out = _store(tmp_path)
    _fake_pythons(tmp_path, monkeypatch, FAKE)
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    name = "torch-chained_dot-eager-2.3.1-to-2.4.0"
    script_before = (out / "upstream" / "torch" / f"{name}.py").read_text()
    document = json.loads((out / "torch.changes.json").read_text())
    document["changes"][0].update(actionable=False, confirmation={
        "status": "not confirmed", "before": 16 * MIB, "after": 15.9 * MIB, "delta": -0.1 * MIB, "relative": -0.006,
        "p": 0.8, "pairs": 5, "before_samples": [16 * MIB] * 5, "after_samples": [15.9 * MIB] * 5,
        "why": "moved the other way side by side"})
    (out / "torch.changes.json").write_text(json.dumps(document))
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    assert _main("--framework", "torch", "--actionable", "--write-only", "--out", str(out)) == 0
    assert "withdrawn: not confirmed: moved the other way side by side" in capsys.readouterr().out
    draft = (out / "upstream" / "torch" / f"{name}.md").read_text()
    # the title names the move the sweep flagged (what the draft was written for), not the side-by-side one
    assert draft.startswith("# torch 2.4.0: retained of an eager autograd training step rises by 6.00 MiB")
    assert "**withdrawn: not a change to file** · standalone: reproduced standalone" in draft
    assert "> **Withdrawn: not a change to file.** gradmem's release sweep flagged retained 10.00 MiB -> 16.00 MiB" in draft
    assert "it is not confirmed: moved the other way side by side." in draft
    assert "| 10.20 MiB | 15.00 MiB |" in draft  # its standalone runs, kept
    assert (out / "upstream" / "torch" / f"{name}.py").read_text() == script_before
    site = tmp_path / "site"
    tallies = site_upstream.write(str(out), str(site))
    assert tallies["torch"]["actionable"] == 0 and tallies["torch"]["run"] == 0
    index = (site / "releases" / "upstream" / "index.html").read_text()
    assert ("withdrawn: not confirmed: moved the other way side by side; standalone: reproduced standalone"
            in index)


def test_a_draft_whose_change_the_sweep_no_longer_flags_is_marked_as_it_stands(tmp_path, capsys, monkeypatch):
    """Swept again, the pair's figures moved within their band: no change of the group is
    left to write its draft from, so `--write-only` marks the draft as written (once)."""
    out = _store(tmp_path)
    _fake_pythons(tmp_path, monkeypatch, FAKE)
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    document = json.loads((out / "torch.changes.json").read_text())
    timed = dict(document["changes"][0], figure="time", advisory=True, actionable=False,
                 confirmation={"status": "advisory", "why": "time: shown, never an actionable memory change"})
    (out / "torch.changes.json").write_text(json.dumps(dict(document, changes=[timed])))  # its time alone flagged
    path = out / "upstream" / "torch" / "torch-chained_dot-eager-2.3.1-to-2.4.0.md"
    written = path.read_text()
    for _ in range(2):
        assert _main("--framework", "torch", "--actionable", "--write-only", "--out", str(out)) == 0
    lines = path.read_text().split("\n")
    assert lines[2].endswith("· **withdrawn: not a change to file** · standalone: reproduced standalone")
    assert lines[4].startswith("> **Withdrawn: not a change to file.** No longer flagged by the release sweep")
    assert lines[5:] == written.split("\n")[3:]  # the rest as written, marked once


def test_a_harness_only_move_is_run_again_with_each_op_a_small_function(tmp_path, capsys, monkeypatch):
    # The inlined script shows no move, gradmem's own pass beside it does (harness only); the
    # same step with each op a small function (the form gradmem's op table runs) moves as the
    # harness did: the loss's form makes it, and the verdict, the draft and the tally say so.
    out = _store(tmp_path)
    flat = FAKE.replace("15.0 if after else 10.2", "10.1 if after else 10.2")
    _fake_pythons(tmp_path, monkeypatch, flat)
    written = []

    def write(spec):
        written.append(spec.form)
        return FAKE if spec.form == "functions" else flat

    monkeypatch.setattr(script, "write", write)
    monkeypatch.setattr(control, "run_group", lambda *a, **k: {
        "2.3.1": {i: {"status": "ok", "figures": {"retained": 10.0 * MIB}} for i in (1, 2)},
        "2.4.0": {i: {"status": "ok", "figures": {"retained": 16.0 * MIB}} for i in (1, 2)}})
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    form = outcome["forms"]["functions"]
    assert outcome["status"] == "harness only" and form["status"] == "reproduced" and written[-1] == "functions"
    assert abs(form["delta"] - 4.8 * MIB) < 1 and form["script"].endswith(".functions.py")
    assert store.label(outcome) == store.LOSS_FORM["functions"] and "the move is in how the framework takes the loss" in outcome["why"]
    folder = out / "upstream" / "torch"
    assert (folder / "torch-chained_dot-eager-2.3.1-to-2.4.0.functions.py").read_text() == FAKE
    draft = (folder / "torch-chained_dot-eager-2.3.1-to-2.4.0.md").read_text()
    assert "| the script with each op a small function ([torch-chained_dot-eager-2.3.1-to-2.4.0.functions.py]" in draft
    assert "the form that shows the move" in draft and "/tmp/torch-2.4.0/bin/python torch-chained_dot-eager-2.3.1-to-2.4.0.functions.py" in draft
    # the control's own samples, not the last form's (a loop variable once shadowed them)
    assert "- gradmem's own pass beside the script: 2.3.1: 10.00, 10.00; 2.4.0: 16.00, 16.00" in draft
    document = json.loads((out / "torch.changes.json").read_text())
    counted = store.tally(document, store.read_outcomes(str(out), "torch"))
    assert counted["harness only"] == 1 and counted["loss form"] == 1
    # both forms' runs are held (2 a side each): a batch over the store measures nothing again
    assert len(store.read_samples(str(out), "torch")) == 8
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    assert "1 already judged" in capsys.readouterr().out


def test_a_harness_only_move_judged_before_the_forms_existed_is_run_in_the_other_form_by_the_batch(
        tmp_path, capsys, monkeypatch):
    out = _store(tmp_path)
    flat = FAKE.replace("15.0 if after else 10.2", "10.1 if after else 10.2")
    _fake_pythons(tmp_path, monkeypatch, flat)
    monkeypatch.setattr(control, "run_group", lambda *a, **k: {
        "2.3.1": {i: {"status": "ok", "figures": {"retained": 10.0 * MIB}} for i in (1, 2)},
        "2.4.0": {i: {"status": "ok", "figures": {"retained": 16.0 * MIB}} for i in (1, 2)}})
    assert _main(ID, "--out", str(out), "--runs", "2", "--no-forms") == 0
    assert "forms" not in store.read_outcomes(str(out), "torch")["changes"][ID]
    # the batch finds the harness-only verdict without the other form's, and runs only that form
    # (the same flat body here: no form moves, so the loss's form is not the cause)
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert [held["status"] for held in outcome["forms"].values()] == ["not reproduced"] * 2
    assert outcome["why"].endswith(": not the loss's form")
    assert store.label(outcome) == "harness only"
    assert "(this run: 1 group(s), 0 already judged)" in capsys.readouterr().out


def test_a_form_whose_script_is_written_otherwise_since_is_run_again_by_the_batch(tmp_path, capsys, monkeypatch):
    # The table form once held lambdas standing in for the adapter's op table; written as
    # the adapter's own since, its old verdict is of another program: the batch runs that
    # form again (and only it), and the new verdict replaces the old.
    out = _store(tmp_path)
    flat = FAKE.replace("15.0 if after else 10.2", "10.1 if after else 10.2")
    _fake_pythons(tmp_path, monkeypatch, flat)
    monkeypatch.setattr(control, "run_group", lambda *a, **k: {
        "2.3.1": {i: {"status": "ok", "figures": {"retained": 10.0 * MIB}} for i in (1, 2)},
        "2.4.0": {i: {"status": "ok", "figures": {"retained": 16.0 * MIB}} for i in (1, 2)}})
    assert _main(ID, "--out", str(out), "--runs", "2") == 0
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert [held["status"] for held in outcome["forms"].values()] == ["not reproduced"] * 2
    held_before = len(store.read_samples(str(out), "torch"))
    monkeypatch.setattr(script, "write", lambda spec: FAKE if spec.form == "table" else flat)
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    outcome = store.read_outcomes(str(out), "torch")["changes"][ID]
    assert outcome["forms"]["table"]["status"] == "reproduced" and store.loss_form(outcome) == "table"
    assert len(store.read_samples(str(out), "torch")) == held_before + 4  # the table's 2 runs a side, no more
    assert "(this run: 1 group(s), 0 already judged)" in capsys.readouterr().out
    # judged for the table as written now: the next batch measures nothing
    monkeypatch.setattr(runner, "run_once", lambda *a, **k: pytest.fail("measured again"))
    assert _main("--framework", "torch", "--actionable", "--out", str(out), "--runs", "2") == 0
    assert "1 already judged" in capsys.readouterr().out


def test_a_pending_growth_figure_in_a_group_is_shown_from_the_sweep_and_not_said_to_be_measured(tmp_path, capsys):
    """A group whose growth per step is flagged but not confirmed yet: the script does not
    measure it (Group.growth: confirmed figures only), so the draft must not say it does,
    and its line shows the sweep's figures (no side-by-side ones exist), not '– -> –'."""
    out = _store(tmp_path)
    document = json.loads((out / "torch.changes.json").read_text())
    pending = dict(document["changes"][0], figure="leak", before=-7168.0, after=-2867.2, actionable=False,
                   confirmation={"status": "pending"})
    (out / "torch.changes.json").write_text(json.dumps(dict(document, changes=[document["changes"][0], pending])))
    assert _main(ID, "--out", str(out), "--write-only") == 0
    folder = out / "upstream" / "torch"
    draft = (folder / "torch-chained_dot-eager-2.3.1-to-2.4.0.md").read_text()
    script_text = (folder / "torch-chained_dot-eager-2.3.1-to-2.4.0.py").read_text()
    assert "growth" not in script_text.split('"""', 2)[2]  # the script's code measures no growth...
    assert "For the growth per step" not in draft  # ...and the draft says so
    line = next(l for l in draft.splitlines() if "torch:chained_dot:eager:leak:2.3.1->2.4.0" in l)
    assert "sweep -7.0 KiB a step -> -2.8 KiB a step (pending)" in line, line
