"""tools/asv_gate.py on stored asv results: it fires on a planted regression, stays
quiet on equal figures and growth within the threshold, and refuses to guess.

One real `asv run` (existing environment) stores results for commit c1 from fixture
records (GRADMEM_ASV_RECORDS: figures constructed in tests/report/report_fixtures.py,
not measured); the other commits' result files are copies with planted changes, so
the gate reads exactly the files asv writes.
"""

import itertools
import json
import subprocess
import sys

import pytest

import asv_helpers as h

sys.path.insert(0, str(h.PROJECT / "tests" / "report"))
from report_fixtures import fixture_records, write_jsonl  # noqa: E402

pytestmark = pytest.mark.slow  # acceptance: the fixture is a real asv run

PEAK = "bench_memory.PeakMemory.track_total"
RETAINED = "bench_memory.RetainedMemory.track_retained"
TIME = "bench_time.Time.track_total"
NOISE = "bench_time.TimeNoise.track_noisy"
CELL = ("chained_dot", "reference", "cpu", "eager")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    repo = tmp / "repo"
    repo.mkdir()
    h.git(repo, "init", "-q", "-b", "main")
    commits = []
    for index in range(5):
        h.git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", f"c{index}")
        commits.append(h.git(repo, "rev-parse", "HEAD"))
    config = h.write_config(tmp, repo)
    home = h.machine_home(tmp)
    records = write_jsonl(tmp / "records.jsonl", fixture_records())
    env = h.environ(home, GRADMEM_ASV_SIZE="tiny", GRADMEM_ASV_OPTIMIZER="none", GRADMEM_ASV_RECORDS=str(records))
    done, seconds = h.run(["run", "--config", str(config), "-E", f"existing:{h.PYTHON}", "--machine", h.MACHINE,
                           "--set-commit-hash", commits[1], "-b", "PeakMemory.track_total", "-b", "Time.track_total",
                           "-b", "RetainedMemory.track_retained", "-b", "TimeNoise.track_noisy"], env, tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"asv run (4 benchmarks x 144 cells, existing env): {seconds:.1f} s")
    [stored] = h.result_files(tmp / "results")
    return {"tmp": tmp, "repo": repo, "commits": commits, "config": config, "home": home, "file": stored}


def plant(store, commit_index, changes):
    """Copy c1's results to commit `commit_index`, scaling figures: {(bench, cell): factor,
    None (no figure) or ("set", value)}."""
    data = json.loads(store["file"].read_text())
    commit = store["commits"][commit_index]
    data["commit_hash"] = commit
    for (bench, cell), factor in changes.items():
        row = data["results"][bench]
        params = [[p.strip("'") for p in axis] for axis in row[1]]
        position = list(itertools.product(*params)).index(cell)
        if isinstance(factor, tuple):
            row[0][position] = factor[1]
        else:
            row[0][position] = None if factor is None else row[0][position] * factor
    path = store["file"].with_name(f"{commit[:8]}-{store['file'].name.split('-', 1)[1]}")
    path.write_text(json.dumps(data))
    return path


def gate(store, *args):
    done = subprocess.run(
        [h.PYTHON, str(h.PROJECT / "tools" / "asv_gate.py"), "--config", str(store["config"]),
         "--machine", h.MACHINE, *args],
        capture_output=True, text=True, cwd=store["tmp"], env=h.environ(store["home"]),
    )
    return done.returncode, done.stdout + done.stderr


def test_stored_figure_is_the_record_figure(store):
    data = json.loads(store["file"].read_text())
    assert data["results"][PEAK][0][0] == fixture_records()[0]["peak_bytes"]["total"]


def test_equal_results_pass(store):
    plant(store, 2, {})
    code, out = gate(store, "--head", store["commits"][2])
    assert code == 0, out
    assert "0 of 6 figures worsened" in out  # 3 cells with figures x (peak, time)


def test_memory_growth_beyond_threshold_fails(store):
    plant(store, 3, {(PEAK, CELL): 1.10})  # 6 MiB -> 6.6 MiB: beyond 2 % and the 512 KiB floor
    code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][3])
    assert code == 1, out
    assert "1.100x" in out and "workload=chained_dot, framework=reference, device=cpu, mode=eager" in out


def test_memory_growth_within_threshold_passes(store):
    plant(store, 3, {(PEAK, CELL): 1.015})
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 0


def test_memory_growth_below_the_floor_passes(store):
    plant(store, 3, {(PEAK, CELL): 1.05})  # 6 MiB + 5 % = 315 KB: within RSS grain (512 KiB)
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 0
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3], "--memory-floor", "65536")[0] == 1


def test_the_memory_figure_gated_is_the_step_peak_unless_asked(store):
    # Retained (what a framework keeps between steps) tripled: shown, not gated by default.
    plant(store, 3, {(RETAINED, CELL): 3.0})
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 0
    code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][3], "--memory-bench", "Retained")
    assert code == 1 and "RetainedMemory.track_retained" in out, out


def test_time_has_its_own_threshold(store):
    plant(store, 3, {(TIME, CELL): 1.05})
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 0
    plant(store, 3, {(TIME, CELL): 1.5})  # 6 ms -> 9 ms: beyond 10 % and the 1 ms floor
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 1
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3], "--kinds", "memory")[0] == 0


def test_a_noisy_time_is_advisory(store):
    # The harness marked the cell's time noisy (other processes took a CPU): a 1.5x
    # step is listed, but the gate does not fail on it; memory still gates.
    plant(store, 3, {(TIME, CELL): 1.5, (NOISE, CELL): ("set", 1.0)})
    code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][3])
    assert code == 0, out
    assert "NOISY" in out and "advisory" in out
    plant(store, 3, {(TIME, CELL): 1.5, (NOISE, CELL): ("set", 1.0), (PEAK, CELL): 1.10})
    assert gate(store, "--base", store["commits"][1], "--head", store["commits"][3])[0] == 1


def test_a_cell_that_stops_running_fails(store):
    plant(store, 3, {(PEAK, CELL): None})
    code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][3])
    assert code == 1 and "now n/a" in out


def test_default_baseline_is_the_nearest_ancestor_with_results(store):
    plant(store, 2, {})
    plant(store, 4, {(PEAK, CELL): 1.10})  # c3 has no results: c4 is judged against c2
    for stale in store["file"].parent.glob(f"{store['commits'][3][:8]}-*.json"):
        stale.unlink()
    code, out = gate(store, "--head", store["commits"][4])
    assert code == 1, out
    assert f"gate: {store['commits'][2][:8]} -> {store['commits'][4][:8]}" in out


def test_missing_results_and_bad_kinds_are_errors(store):
    code, out = gate(store, "--base", store["commits"][0], "--head", store["commits"][1])
    assert code == 2 and "no results" in out
    code, out = gate(store, "--kinds", "latency")
    assert code == 2 and "valid kinds: memory, time" in out


def test_a_damaged_result_file_is_named_and_skipped(store):
    # c2's file is cut short (a killed copy, a hand edit): asv names it with its line
    # and skips it, so c4 is judged against c1, the nearest ancestor with readable results.
    damaged = plant(store, 2, {})
    damaged.write_text(damaged.read_text()[:300])
    plant(store, 4, {(PEAK, CELL): 1.10})
    for stale in store["file"].parent.glob(f"{store['commits'][3][:8]}-*.json"):
        stale.unlink()
    code, out = gate(store, "--head", store["commits"][4])
    assert code == 1, out
    assert f"gate: {store['commits'][1][:8]} -> {store['commits'][4][:8]}" in out
    assert f"Error parsing JSON in file '{damaged}'" in out and "line 1 column" in out
    code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][2])
    assert code == 2 and str(damaged) in out and "no results for" in out  # nothing to judge

    suite = store["tmp"] / "results" / "benchmarks.json"
    whole = suite.read_text()
    try:
        suite.write_text(whole[:100])
        code, out = gate(store, "--base", store["commits"][1], "--head", store["commits"][4])
        assert code == 2 and f"{suite}: not valid JSON" in out and "line 3 column" in out
    finally:
        suite.write_text(whole)
