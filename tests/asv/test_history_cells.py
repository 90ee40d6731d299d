"""tools/asv_history.py hands asv a -b pattern so that asv starts benchmark processes only
for the cells the sweep ran (one process per benchmark and cell otherwise: 17 x 216).
The pattern is matched the way asv matches it (asv.benchmarks.Benchmarks): against
`name('workload', 'framework', 'device', 'mode')` with the parameters' reprs.
"""

import itertools
import re
import sys

import asv_helpers as h

sys.path.insert(0, str(h.PROJECT / "tools"))
import asv_history  # noqa: E402
from benchmarks import common  # noqa: E402


def selected(pattern):
    names = (f"bench_memory.PeakMemory.track_backward({', '.join(map(repr, cell))})"
             for cell in itertools.product(*common.PARAMS))
    return [name for name in names if re.search(pattern, name)]


def test_the_pattern_selects_exactly_the_swept_cells(monkeypatch):
    monkeypatch.setenv("GRADMEM_ASV_FRAMEWORKS", "reference,torch")
    monkeypatch.setenv("GRADMEM_ASV_WORKLOADS", "rnn_fanout,unet")
    monkeypatch.setenv("GRADMEM_ASV_DEVICES", "cpu")
    monkeypatch.setenv("GRADMEM_ASV_MODES", "eager")
    found = selected(asv_history.swept_cells_regex())
    want = [f"bench_memory.PeakMemory.track_backward('{w}', '{f}', 'cpu', 'eager')"
            for w in ("rnn_fanout", "unet") for f in ("reference", "torch")]
    assert found == want


def test_everything_swept_means_no_pattern(monkeypatch):
    for name in ("FRAMEWORKS", "WORKLOADS", "DEVICES", "MODES"):
        monkeypatch.delenv(f"GRADMEM_ASV_{name}", raising=False)
    assert asv_history.swept_cells_regex() is None
    monkeypatch.setenv("GRADMEM_ASV_MODES", "compiled")  # one axis is enough
    assert len(selected(asv_history.swept_cells_regex())) == len(common.PARAMS[0]) * len(common.PARAMS[1]) * 2
