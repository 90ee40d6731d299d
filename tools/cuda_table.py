"""The Markdown table of CUDA records, per cell, read through the figure registry.

    python tools/cuda_table.py results/gpu/2026-11-26-h200/*.jsonl

Columns: the allocator's step peak (an upper bound marked "<="), reserved (the
allocator's cache at its highest in the step; "-" in records from before it was
recorded), NVML's figure of the process, peak / bound, the median step time ("~" after
it: noisy, advisory only, as the run's own table marks it: the record's `time_noise`
says why), and the gradient error. docs/gpu.md defines each.
"""

import json
import sys

from harness import figures

HEAD = ("| workload | size | framework | mode | allocator step peak MiB | reserved MiB | NVML MiB | "
        "peak / bound | time ms | grad err |")


def row(record):
    def mib(name):
        value = figures.value(record, name)
        if value is None:
            return "-"
        return ("<=" if figures.upper_bound(record, name) else "") + f"{value / figures.MIB:.1f}"

    ratio = figures.peak_over_bound(record)
    seconds = figures.value(record, "time")
    error = figures.value(record, "grad_rel_err")
    optimizer = f" +{record['optimizer']}" if record.get("optimizer") else ""
    noisy = "~" if record.get("time_noisy") else ""
    if figures.source(record).kind is None:
        return (f"| {record['workload']}{optimizer} | {record['size']} | {record['framework']} | {record['mode']} | "
                f"no device figure | - | - | - | {seconds * 1e3:.1f}{noisy} | - |")
    bound = "<=" if figures.upper_bound(record, "step_peak") else ""
    return (f"| {record['workload']}{optimizer} | {record['size']} | {record['framework']} | {record['mode']} | "
            f"{mib('step_peak')} | {mib('reserved')} | {mib('nvml')} | "
            f"{bound}{ratio:.2f} | {seconds * 1e3:.1f}{noisy} | {error:.1e} |".replace("None", "-"))


def main(paths):
    records = [json.loads(line) for path in paths for line in open(path, encoding="utf-8") if line.strip()]
    ok = [r for r in records if r.get("status") == "ok" and r.get("device") != "cpu"]
    print(HEAD)
    print("|" + "---|" * (HEAD.count("|") - 1))
    for record in ok:
        print(row(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
