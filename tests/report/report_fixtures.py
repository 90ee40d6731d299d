"""Fixtures for the report tests: result records *constructed here*, not measured.

They follow the record schema (harness/results.py) so the page can be tested before
and independently of a real sweep; every figure below is made up and says nothing
about any framework. The end-to-end test on a real sweep is test_report_real.py.
"""

import json

from harness.units import MIB


def fixture_record(workload="chained_dot", framework="reference", status="ok", **overrides):
    record = {
        "schema": 2, "workload": workload, "size": "tiny", "dtype": "float32",
        "framework": framework, "mode": "eager", "device": "cpu",
        "optimizer": None, "remat": "none", "order": "heap" if framework == "reference" else None,
        "status": status, "message": "",
        "provenance": {
            "versions": {"numpy": "2.4.0", framework: "0.0-fixture"}, "git_commit": "f1x7u4e",
            "machine": {"cpu": "fixture cpu"}, "python": "3.11", "env": {"OMP_NUM_THREADS": "1"},
            "threads": 1, "seed": 0, "started_at": "2025-01-01T00:00:00Z",
        },
    }
    if status == "ok":
        record.update({
            "retained_bytes": 2 * MIB,
            "peak_bytes": {"forward": 4 * MIB, "backward": 6 * MIB, "total": 6 * MIB},
            "first_step_retained_bytes": 0,
            "first_step_peak_bytes": {"forward": 5 * MIB, "backward": 7 * MIB, "total": 7 * MIB},
            "live_bytes": {"after_forward": 4 * MIB, "after_backward": 0},
            "breakdown_bytes": {"params": MIB, "inputs": MIB, "gradients": MIB, "optimizer_state": 0,
                                "saved_activations": 4 * MIB, "temporaries": MIB},
            "breakdown_method": {k: "made up by the fixture" for k in (
                "params", "inputs", "gradients", "optimizer_state", "saved_activations", "temporaries")},
            "bound_bytes": 4 * MIB,
            "tracemalloc_peak_bytes": None, "device_memory": None,
            "time_s": {"forward": 0.002, "backward": 0.004, "total": 0.006},
            "time_spread_s": {"forward": 0.0001, "backward": 0.0002, "total": 0.0003},
            "compile_s": None, "grad_rel_err": 3e-7,
            "timeline": {"t_s": [i * 0.001 for i in range(50)],
                         "rss_bytes": [100 * MIB + min(i, 30) * MIB // 5 for i in range(50)],
                         "marks": [[0.0, "forward"], [0.02, "backward"]]},
        })
    record.update(overrides)
    if status == "ok":  # as today's worker writes them: the resident set split by page kind
        for retained in ("retained_bytes", "first_step_retained_bytes"):  # (all the fixture's own pages)
            detail = retained.replace("retained_bytes", "retained_detail_bytes")
            if detail not in overrides and isinstance(record.get(retained), int):
                record[detail] = {"anon": record[retained], "file": 0, "shmem": 0}
    if status == "ok":  # footprint = retained + step peak, as the schema requires
        for retained, peak, footprint in (("retained_bytes", "peak_bytes", "footprint_bytes"),
                                          ("first_step_retained_bytes", "first_step_peak_bytes",
                                           "first_step_footprint_bytes")):
            if footprint not in overrides:
                record[footprint] = {k: record[retained] + v for k, v in record[peak].items()}
    return record


def fixture_records():
    return [
        fixture_record("chained_dot", "reference"),
        fixture_record("chained_dot", "torch", peak_bytes={"forward": 8 * MIB, "backward": 40 * MIB, "total": 40 * MIB},
                       grad_rel_err=2e-2),
        fixture_record("chained_dot", "jax", status="unavailable", message="jax is not installed (pip install 'gradmem[jax]')"),
        fixture_record("rnn_fanout", "reference", order="bfs"),
        fixture_record("rnn_fanout", "torch", status="oom", message="worker exceeded the memory limit <&> at backward"),
        fixture_record("rnn_fanout", "tensorflow", status="error", message="Traceback: ValueError('bad <script>alert(1)</script>')"),
        fixture_record("chained_dot", "jax", status="ok", mode="compiled", grad_rel_err=5e-6,
                       peak_bytes={"total": 5 * MIB}, time_s={"total": 0.001}, timeline=None),
    ]


def write_jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path
