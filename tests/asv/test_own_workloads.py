"""asv over a user's own workload: GRADMEM_ASV_WORKLOADS takes an absolute .py path
(or module:attr) beside the built-in names, and the benchmarks' grid gains it as a
workload value (docs/workloads.md, "asv over your workloads")."""

import importlib
import subprocess
import sys

import pytest

import asv_helpers as h

sys.path.insert(0, str(h.PROJECT))
from benchmarks import common  # noqa: E402


@pytest.fixture
def grid(monkeypatch):
    """benchmarks.common re-imported under the environment a test sets (the grid is
    built at import, as asv imports it), and restored afterwards."""
    def load(**env):
        for name, value in env.items():
            monkeypatch.setenv(f"GRADMEM_ASV_{name}", value)
        return importlib.reload(common)

    yield load
    monkeypatch.undo()
    importlib.reload(common)


def test_a_file_workload_joins_the_grid_and_a_relative_path_is_refused(grid, tmp_path):
    own = str(tmp_path / "mine.py")
    module = grid(WORKLOADS=f"chained_dot,{own}")
    assert module.WORKLOADS == module.BUILT_IN_WORKLOADS + [own]
    assert module.PARAMS[0][-1] == own
    with pytest.raises(ValueError, match="absolute path"):  # SelectionError, re-defined by the reload
        grid(WORKLOADS="mine.py")


def test_the_benchmark_finds_the_file_workloads_record(grid, tmp_path):
    # The template `harness new-workload` writes runs as it is: one real tiny sweep of
    # it through the benchmarks' own sweep(), its record found under the file's path.
    own = tmp_path / "mine.py"
    subprocess.run([sys.executable, "-m", "harness", "new-workload", str(own)], check=True, cwd=h.PROJECT)
    module = grid(WORKLOADS=str(own), SIZE="tiny", FRAMEWORKS="reference", DEVICES="cpu", MODES="eager",
                  OPTIMIZER="none")
    cells = module.sweep()
    record = cells[(str(own), "reference", "cpu", "eager")]
    assert record["status"] == "ok" and record["workload"].startswith(f"{own}#sha256=")
    # a tiny step sits below the RSS grain (its peak may read 0); what is checked is
    # that the benchmark's index holds the file's measured record, bound and all
    assert "total" in record["peak_bytes"] and record["bound_bytes"] > 0
