"""tools/asv_ci.sh (what .github/workflows/asv.yml runs) and tools/asv_history.py, end to
end at `tiny` in a scratch copy of this checkout: record, gate, publish.

The scratch repository is this working tree committed as c1 (the venv is linked in).
c1 is recorded from a real sweep (one cell: the reference engine's rnn_fanout on CPU):
there is no baseline yet, so the gate has nothing to compare and the run passes. c2
and c3 are recorded from records (GRADMEM_ASV_RECORDS, constructed, not measured): c2
with c1's figures (the gate passes), c3 with that cell's memory figures planted 1.5x +
4 MiB higher (the gate fails and the script names the metric and the cell). Then
tools/asv_history.py records c4 from a real sweep of c4's own checkout, skipping c1,
and refuses c4 once the suite's VERSION has changed (c5).
"""

import json
import os
import shutil
import subprocess

import pytest

import asv_helpers as h
from harness import results

MACHINE = "ci-test"
CELL = "workload=rnn_fanout, framework=reference, device=cpu, mode=eager"
SWEEP = {"GRADMEM_ASV_SIZE": "tiny", "GRADMEM_ASV_FRAMEWORKS": "reference", "GRADMEM_ASV_WORKLOADS": "rnn_fanout",
         "GRADMEM_ASV_DEVICES": "cpu", "GRADMEM_ASV_MODES": "eager"}
# The memory benchmarks at the swept cell only (asv matches `name(param, ...)`): 4 asv
# benchmark processes per run instead of 12 x 144.
ASV_ARGS = ["-b", r"PeakMemory\..*\('rnn_fanout', 'reference', 'cpu', 'eager'\)"]


def copy_checkout(repo):
    """This working tree (tracked and untracked, not ignored files) as a new repository."""
    files = h.git(h.PROJECT, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, files):
        source = h.PROJECT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    os.symlink(h.PROJECT / ".venv", repo / ".venv")
    h.git(repo, "init", "-q", "-b", "main")
    commit(repo, "c1")


def commit(repo, message):
    h.git(repo, "add", "-A")
    h.git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", message)
    return h.git(repo, "rev-parse", "HEAD")


def planted(records_path, out_path):
    """The records with the swept cell's step peaks (and the figures read beside them) raised
    1.5x + 4 MiB; footprints recomputed as retained + step peak, so the records stay valid."""
    records = [json.loads(line) for line in records_path.read_text().splitlines() if line.strip()]
    raised = 0
    for record in records:
        if record["status"] != "ok":
            continue
        for key in ("peak_bytes", "first_step_peak_bytes", "live_bytes", "tracemalloc_peak_bytes"):
            for phase, figure in (record.get(key) or {}).items():
                if isinstance(figure, int):
                    record[key][phase] = int(figure * 1.5) + 4 * 2**20
                    raised += 1
        for prefix in ("", "first_step_"):
            retained = record[prefix + "retained_bytes"]
            record[prefix + "footprint_bytes"] = {p: retained + v for p, v in record[prefix + "peak_bytes"].items()}
        results.validate(record)
    assert raised, "no memory figure to plant a regression in"
    out_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out_path


def run(repo, home, args, **variables):
    env = h.environ(home, **SWEEP, GITHUB_ACTIONS="true", **variables)
    done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def ci(tmp_path_factory):
    import time

    tmp = tmp_path_factory.mktemp("ci")
    repo, home = tmp / "repo", tmp / "home"
    repo.mkdir()
    home.mkdir()
    copy_checkout(repo)
    script = ["tools/asv_ci.sh", MACHINE, *ASV_ARGS]
    runs, commits, timings = {}, {"c1": h.git(repo, "rev-parse", "HEAD")}, {}
    start = time.monotonic()
    runs["c1"] = run(repo, home, script)
    timings["c1 (sweep)"] = time.monotonic() - start
    sweep = tmp / "c1.jsonl"
    shutil.copyfile(repo / "out" / "ci-sweep.jsonl", sweep)
    commits["c2"] = commit(repo, "c2 no-op")
    start = time.monotonic()
    runs["c2"] = run(repo, home, script, GRADMEM_ASV_RECORDS=str(sweep))
    timings["c2 (records)"] = time.monotonic() - start
    commits["c3"] = commit(repo, "c3 planted")
    runs["c3"] = run(repo, home, script, GRADMEM_ASV_RECORDS=str(planted(sweep, tmp / "c3.jsonl")))
    commits["c4"] = commit(repo, "c4 no-op")
    start = time.monotonic()
    runs["history"] = run(repo, home, [".venv/bin/python", "tools/asv_history.py", "--machine", MACHINE,
                                       "--skip-existing", "--keep", str(tmp / "kept"), commits["c1"],
                                       commits["c4"], "--", *ASV_ARGS])
    timings["history c4 (sweep)"] = time.monotonic() - start
    common = repo / "benchmarks" / "common.py"
    common.write_text(common.read_text().replace('VERSION = "', 'VERSION = "bumped-', 1))
    commits["c5"] = commit(repo, "c5 bumps the suite's VERSION")
    runs["older version"] = run(repo, home, [".venv/bin/python", "tools/asv_history.py", "--machine", MACHINE,
                                             commits["c4"], "--", *ASV_ARGS])
    print("\n" + ", ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
    return {"repo": repo, "runs": runs, "commits": commits, "sweep": sweep, "tmp": tmp}


def stored(ci, name):
    return list((ci["repo"] / "results" / MACHINE).glob(f"{ci['commits'][name][:8]}-*.json"))


@pytest.mark.slow  # acceptance: tools/asv_ci.sh end to end (real asv runs)
def test_first_run_records_and_publishes_without_a_baseline(ci):
    code, out = ci["runs"]["c1"]
    assert code == 0, out[-4000:]
    assert "no ancestor of" in out and "nothing to compare" in out
    assert stored(ci, "c1")
    records = [json.loads(line) for line in ci["sweep"].read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"]  # one real cell, measured
    site = ci["repo"] / "out" / "asv-site"
    assert (site / "index.html").is_file() and (site / "comparison" / "index.html").is_file()
    assert "comparison/index.html" in (site / "index.html").read_text()


@pytest.mark.slow  # acceptance: tools/asv_ci.sh end to end (real asv runs)
def test_equal_figures_pass_the_gate(ci):
    code, out = ci["runs"]["c2"]
    assert code == 0, out[-4000:]
    assert f"gate: {ci['commits']['c1'][:8]} -> {ci['commits']['c2'][:8]}" in out
    assert "0 of " in out and "figures worsened" in out and "WORSE" not in out


@pytest.mark.slow  # acceptance: tools/asv_ci.sh end to end (real asv runs)
def test_planted_regression_fails_naming_metric_and_cell(ci):
    code, out = ci["runs"]["c3"]
    assert code == 1, out[-4000:]
    worse = [line for line in out.splitlines() if line.startswith("WORSE")]
    assert worse and all(f"({CELL})" in line and "bench_memory." in line for line in worse), out[-4000:]
    assert "bench_memory.PeakMemory.track_backward" in "\n".join(worse)
    assert "== FAILED" in out
    assert [line for line in out.splitlines() if line.startswith("::error title=asv gate")]
    assert stored(ci, "c3")  # recorded and published all the same
    assert ci["commits"]["c3"][:8] in (ci["repo"] / "out" / "asv-site" / "index.json").read_text()


@pytest.mark.slow  # acceptance: tools/asv_ci.sh end to end (real asv runs)
def test_history_records_a_commit_from_its_own_checkout(ci):
    code, out = ci["runs"]["history"]
    assert code == 0, out[-4000:]
    assert f"{ci['commits']['c1'][:8]} c1: has results, skipped" in out
    assert stored(ci, "c4")
    kept = ci["tmp"] / "kept" / f"{ci['commits']['c4'][:8]}.jsonl"
    records = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [r["provenance"]["git_commit"] for r in records if r["status"] == "ok"] == [ci["commits"]["c4"]]
    data = json.loads(stored(ci, "c4")[0].read_text())
    assert data["commit_hash"] == ci["commits"]["c4"] and data["env_name"] == h.installed_env_name()
    figure = data["results"]["bench_memory.PeakMemory.track_backward"][0]
    assert [v for v in figure if v == v and v is not None] == [records[0]["peak_bytes"]["backward"]]


@pytest.mark.slow  # acceptance: tools/asv_ci.sh end to end (real asv runs)
def test_history_refuses_a_commit_whose_suite_had_another_version(ci):
    code, out = ci["runs"]["older version"]
    assert code == 1, out[-4000:]
    assert "FAILED: its benchmarks' VERSION is 'gradmem-" in out and "this suite's is 'bumped-" in out


def test_the_workflow_runs_set_up_and_this_script_only():
    import re

    text = (h.PROJECT / ".github" / "workflows" / "asv.yml").read_text()
    assert re.findall(r"^\s*(?:- )?run: (.+)$", text, re.M) == ["make setup", 'tools/asv_ci.sh "$MACHINE"']
    assert "fetch-depth: 0" in text  # publish and the gate's baseline need the history
