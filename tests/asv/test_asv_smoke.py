"""The asv smoke run of the test command: `asv check` and `asv run` on the installed
environment (`-E installed:`, harness/asv_env.py) at `tiny` size, `asv publish`, and the
comparison page of the same sweep.

Real measurements, kept small: two numpy-based frameworks, two workloads, CPU (the
CUDA cells are swept too and must come back n/a on a machine without a GPU). The
figures asv stores must be exactly the harness records' figures, fanned out from one
setup_cache sweep; every cell that did not run must be NaN, never a number.

asv starts one process per benchmark and cell (17 x 216 here, ~60 s), so `asv run`
gets a `-b` pattern (as tools/asv_history.py does) naming the swept cells *and* some
that are not swept (torch, the compiled mode): those go through the benchmarks' own
n/a path; the rest asv stores as n/a without running them.
"""

import itertools
import json
import math
import subprocess
import sys
import time

import pytest

import asv_helpers as h

pytestmark = pytest.mark.slow  # acceptance: real asv check/run/publish, Chromium

sys.path.insert(0, str(h.PROJECT / "tests" / "report"))  # chromium_cdp

FRAMEWORKS = "reference,autograd"
WORKLOADS = "chained_dot,rnn_fanout"
# The cells asv runs: the swept ones plus unswept torch and compiled cells (see above).
BENCH_PATTERN = r"\('(?:chained_dot|rnn_fanout)', '(?:reference|autograd|torch)', '(?:cpu|cuda)', '(?:eager|compiled)'\)$"
TRACKS = {  # benchmark -> the record's figure it must carry
    "bench_memory.PeakMemory.track_forward": ("peak_bytes", "forward"),
    "bench_memory.PeakMemory.track_backward": ("peak_bytes", "backward"),
    "bench_memory.PeakMemory.track_step": ("peak_bytes", "step"),
    "bench_memory.PeakMemory.track_total": ("peak_bytes", "total"),
    # what the framework keeps: its own pages (anon + shmem) of the resident set kept; the
    # footprints add the step peak to them; code pages are the file pages kept
    "bench_memory.RetainedMemory.track_retained": lambda r: own(r, "retained_detail_bytes"),
    "bench_memory.FootprintMemory.track_total": lambda r: own(r, "retained_detail_bytes") + r["peak_bytes"]["total"],
    "bench_memory.CodePages.track_code_pages": ("retained_detail_bytes", "file"),
    "bench_memory.GrowthPerStep.track_leak": ("leak", "bytes_per_step"),
    "bench_memory.FirstStepMemory.track_total": ("first_step_peak_bytes", "total"),
    "bench_memory.FirstStepMemory.track_footprint":
        lambda r: own(r, "first_step_retained_detail_bytes") + r["first_step_peak_bytes"]["total"],
    "bench_memory.SavedActivations.track_saved_activations": ("breakdown_bytes", "saved_activations"),
    "bench_memory.LiveMemory.track_after_backward": ("live_bytes", "after_backward"),
    "bench_memory.DeviceMemory.track_allocator_peak": ("device_memory", "peak_bytes", "total"),
    "bench_time.Time.track_forward": ("time_s", "forward"),
    "bench_time.Time.track_backward": ("time_s", "backward"),
    "bench_time.Time.track_step": ("time_s", "step"),
    "bench_time.Time.track_total": ("time_s", "total"),
    "bench_time.Time.track_compile": ("compile_s",),
}


def own(record, key):
    return record[key]["anon"] + record[key]["shmem"]


def dig(record, path):
    value = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("asv-smoke")
    config = h.write_config(tmp, h.PROJECT)
    home = h.machine_home(tmp)
    kept = tmp / "sweep.jsonl"
    env = h.environ(home, GRADMEM_ASV_SIZE="tiny", GRADMEM_ASV_FRAMEWORKS=FRAMEWORKS,
                    GRADMEM_ASV_WORKLOADS=WORKLOADS, GRADMEM_ASV_MODES="eager", GRADMEM_ASV_KEEP=str(kept))
    timings = {}
    check, timings["asv check"] = h.run(["check", "--config", str(config), "-E", f"installed:{h.PYTHON}"], env, tmp)
    commit = h.git(h.PROJECT, "rev-parse", "HEAD")
    run, timings["asv run"] = h.run(["run", "--config", str(config), "-E", f"installed:{h.PYTHON}",
                                     "--machine", h.MACHINE, "--set-commit-hash", commit, "-b", BENCH_PATTERN, "--show-stderr"], env, tmp)
    publish, timings["asv publish"] = h.run(["publish", "--config", str(config)], env, tmp)
    print("\n" + ", ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
    return {"tmp": tmp, "check": check, "run": run, "publish": publish, "commit": commit, "kept": kept}


def test_asv_check_finds_no_problems(smoke):
    assert smoke["check"].returncode == 0, smoke["check"].stdout + smoke["check"].stderr
    assert "No problems found" in smoke["check"].stdout


def test_asv_run_records_results_for_head(smoke):
    run = smoke["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [stored] = h.result_files(smoke["tmp"] / "results")
    assert stored.name == h.result_file_name(smoke["commit"], h.installed_env_name())
    data = json.loads(stored.read_text())
    assert data["commit_hash"] == smoke["commit"]
    assert set(TRACKS) <= set(data["results"])
    # one sweep fed every benchmark: a single setup_cache ran
    assert [k for k in data["durations"] if k.startswith("<setup_cache")] == ["<setup_cache common:%d>" % _sweep_line()]


def _sweep_line():
    import inspect

    from benchmarks import common

    return inspect.getsourcelines(common.sweep)[1]


def test_stored_figures_are_the_records_and_the_rest_is_nan(smoke):
    from harness.results import read_records

    records = {(r["workload"], r["framework"], r["device"], r["mode"]): r for r in read_records(smoke["kept"])}
    ran = [r for r in records.values() if r["status"] == "ok"]
    assert ran, "no cell of the smoke sweep ran: nothing was compared"
    assert {r["device"] for r in ran} == {"cpu"}  # no GPU here: cuda cells are not ok
    [stored] = h.result_files(smoke["tmp"] / "results")
    data = json.loads(stored.read_text())
    checked = 0
    for bench, path in TRACKS.items():
        values, params = data["results"][bench][0], data["results"][bench][1]
        cells = itertools.product(*[[p.strip("'") for p in axis] for axis in params])
        for cell, value in zip(cells, values):
            record = records.get(cell)
            ok = record and record["status"] == "ok"
            expected = (path(record) if callable(path) else dig(record, path)) if ok else None
            if isinstance(expected, (int, float)):
                assert value == pytest.approx(expected, rel=1e-12), (bench, cell)
                checked += 1
            else:  # not swept, not ok, or no such figure (e.g. CPU device memory): n/a
                assert value is None or math.isnan(value), (bench, cell, value)
    assert checked >= len(ran) * 8  # peak x4, first step, live, time total, ... per ok cell


def test_asv_publish_builds_the_site(smoke):
    publish = smoke["publish"]
    assert publish.returncode == 0, publish.stdout + publish.stderr
    html = smoke["tmp"] / "html"
    index = json.loads((html / "index.json").read_text())
    assert "bench_memory.PeakMemory.track_total" in index["benchmarks"]
    assert index["benchmarks"]["bench_memory.PeakMemory.track_total"]["unit"] == "bytes"
    assert h.MACHINE in index["machines"]
    graphs = list(html.glob("graphs/**/bench_memory.PeakMemory.track_total.json"))
    assert graphs, "no history graph for the peak-memory benchmark"
    assert (html / "index.html").exists()


def test_comparison_page_of_the_same_sweep_renders_in_chromium(smoke, tmp_path):
    import chromium_cdp

    if chromium_cdp.find_chromium() is None:
        pytest.skip("no chromium on PATH; run tools/ensure_chromium.sh")
    start = time.monotonic()
    out = tmp_path / "site"
    done = subprocess.run([h.PYTHON, "-m", "harness", "report", str(smoke["kept"]), "--out", str(out)],
                          capture_output=True, text=True, cwd=h.PROJECT)
    assert done.returncode == 0, done.stderr
    print(f"\nharness report: {time.monotonic() - start:.1f} s")
    seen = chromium_cdp.inspect_page(
        f"file://{out / 'index.html'}",
        "({cells: document.querySelectorAll('table.grid td.cell').length,"
        " ok: document.querySelectorAll('table.grid td.status-ok').length})",
        screenshot=str(tmp_path / "page.png"),
    )
    assert seen["problems"] == []
    records = [json.loads(line) for line in smoke["kept"].read_text().splitlines()]
    assert seen["value"]["cells"] == len(records)  # one grid cell per swept cell
    assert seen["value"]["ok"] == sum(r["status"] == "ok" for r in records) > 0
