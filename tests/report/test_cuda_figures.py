"""The CUDA records of the first GPU run (NVIDIA H200, results/gpu/2026-11-26-h200/,
written by gradmem on that machine) as the page, the run's table and the registry
show them: the device allocator's figures, never the host's RSS."""

import ast
import json
import pathlib
import re

import pytest

from harness import figures
from harness.report.page import write_page
from harness.sweep import summary_table
from harness.units import MIB

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "gpu" / "2026-11-26-h200"


def records(*names):
    out = []
    for name in names or sorted(p.name for p in RUN.glob("*.jsonl")):
        out += [json.loads(line) for line in (RUN / name).read_text().splitlines() if line.strip()]
    return out


def cell(found, workload, framework, mode="eager", size="small"):
    (record,) = [r for r in found if (r["workload"], r["framework"], r["mode"], r["size"]) ==
                 (workload, framework, mode, size) and r["status"] == "ok"]
    return record


def test_the_registry_reads_a_cuda_cell_from_its_allocator():
    found = records()
    torch_paper = cell(found, "chained_dot", "torch", size="paper")
    # torch.cuda.max_memory_allocated around a warm step, read the same by an independent script
    assert figures.mib(figures.value(torch_paper, "step_peak")) == pytest.approx(407.63, abs=0.01)
    assert figures.peak_over_bound(torch_paper) == pytest.approx(1.08, abs=0.005)
    assert figures.value(torch_paper, "host_step_peak") < 1 * MIB  # the host's RSS, a figure of its own
    assert figures.mib(figures.value(torch_paper, "nvml")) == pytest.approx(1226, abs=1)
    compared = 0
    for record in found:
        if record["status"] == "ok" and figures.source(record).kind == "device":
            # no CUDA cell below 0.5x its bound: an allocator sees at least what the math keeps
            assert figures.peak_over_bound(record) > 0.5, record["workload"]
            # NVML's process figure holds the CUDA context and every pool: never below the allocator's
            in_use = figures.value(record, "retained") + figures.value(record, "step_peak")
            nvml = figures.value(record, "nvml")
            assert nvml is None or nvml > in_use, record["workload"]
            compared += nvml is not None
    assert compared >= 25  # every cell of the run but one whose NVML sampler read nothing


def test_jax_without_a_peak_reset_is_an_upper_bound_and_tinygrad_without_a_probe_has_no_figure():
    found = records()
    jax_compiled = cell(found, "chained_dot", "jax", "compiled")
    assert figures.upper_bound(jax_compiled, "step_peak")
    assert not figures.upper_bound(cell(found, "chained_dot", "torch"), "step_peak")
    tiny = cell(found, "chained_dot", "tinygrad")
    assert figures.source(tiny).kind is None and "no cuda allocator figure" in figures.source(tiny).reason
    assert figures.value(tiny, "step_peak") is None and figures.value(tiny, "host_step_peak") is not None


def test_the_page_shows_device_figures_and_never_colours_an_upper_bound(tmp_path):
    write_page([str(p) for p in sorted(RUN.glob("*.jsonl"))], str(tmp_path / "site"))
    page = (tmp_path / "site" / "index.html").read_text()
    assert "407.6 MiB" in page and "1.08× bound" in page  # torch chained_dot paper
    assert "0.00× bound" not in page
    # (" lowest": the row's lowest exact step peak, harness/report/lowest.py)
    tds = [(lowest + attrs, body) for lowest, attrs, body in
           re.findall(r'<td class="cell status-ok( lowest)?"([^>]*)>(.*?)</td>', page)]
    upper = [attrs for attrs, _ in tds if 'data-upper-bound="1"' in attrs]
    assert upper and all("lowest" not in attrs for attrs in upper)  # never marked the lowest
    assert sum('data-source="none"' in attrs for attrs, _ in tds) == 4  # the tinygrad cells
    assert all("lowest" not in attrs for attrs, _ in tds if 'data-source="none"' in attrs)
    assert any(" lowest" in attrs for attrs, _ in tds)


def test_the_runs_table_shows_device_figures_bounds_and_none():
    text = summary_table.format_table(records("cuda-paper.jsonl", "cuda-small.jsonl", "cuda-tinygrad.jsonl"))
    torch_row = next(line for line in text.splitlines() if line.startswith("chained_dot") and " torch " in line
                     and "407.6" in line)
    assert "1.08" in torch_row
    jax_row = next(line for line in text.splitlines() if line.startswith("chained_dot") and " jax " in line
                   and "compiled" in line)
    assert "<=1081.5" in jax_row and "<=23.14" in jax_row
    assert "n/a chained_dot tinygrad" in text and "reserved MiB" in text


#: the modules that make a record's memory fields (the passes, their meters) and the
#: schema that checks them; every other module reads figures through harness/figures.py
PRODUCERS = {"figures.py", "results.py", "measure/worker.py", "measure/memory_meter.py", "measure/cuda.py"}
RECORD_FIELDS = {"peak_bytes", "retained_bytes", "footprint_bytes", "first_step_peak_bytes",
                 "first_step_retained_bytes", "first_step_footprint_bytes", "device_memory"}


def test_no_module_but_the_registry_reads_a_memory_figure_by_hand():
    package = ROOT / "harness"
    readers = []
    for path in package.rglob("*.py"):
        name = path.relative_to(package).as_posix()
        if name in PRODUCERS or name.startswith(("engine/", "frameworks/")):  # engines' own counters
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in RECORD_FIELDS:
                readers.append(f"{name}:{node.lineno} {node.value}")
    assert readers == []


def test_the_cuda_table_tool_marks_a_noisy_time_and_only_that():
    # tools/cuda_table.py makes docs/gpu.md's tables: a time taken while other processes
    # used a CPU is advisory, and the table must say so as the run's own table does
    import subprocess
    import sys

    run = ROOT / "results" / "gpu" / "2026-11-26-h200-resume" / "cuda-compiled.jsonl"
    text = subprocess.run([sys.executable, str(ROOT / "tools" / "cuda_table.py"), str(run)],
                          capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = {tuple(cell.strip() for cell in line.split("|")[1:5]): line.split("|")[9].strip()
            for line in text.splitlines()[2:]}
    by_record = {(r["workload"], r["size"], r["framework"], r["mode"]): r
                 for r in map(json.loads, run.read_text().splitlines())}
    assert rows.keys() == by_record.keys()
    for key, shown in rows.items():
        assert shown.endswith("~") == bool(by_record[key]["time_noisy"]), (key, shown)
    assert any(s.endswith("~") for s in rows.values()) and not all(s.endswith("~") for s in rows.values())
