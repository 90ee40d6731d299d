"""Predicted against measured, as the Markdown tables of docs/predicted.md.

    python tools/predicted_table.py RESULTS.jsonl [...]

Per predictor (framework, mode): the cells compared and the median and worst error
(predicted / measured step peak - 1); then every ok cell with its prediction's state,
the predicted and measured MiB and the ratio. The figures come from the records'
``prediction`` (harness/measure/prediction.py); nothing is recomputed here.
"""

import sys

from harness.measure import prediction
from harness.report.fmt import signed_percent
from harness.report.records import load
from harness.units import MIB


def _mib(value):
    return "-" if value is None else f"{value / MIB:.1f}"


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    records = [r for r in load(argv) if r.get("status") == "ok" and r.get("prediction")]
    print("| framework | mode | cells | median error | worst error (cell) |")
    print("|---|---|---:|---:|---|")
    for row in prediction.summary(records):
        mode = row["mode"] + ("" if row["same_program"] else " (another program: XLA)")
        print(f"| {row['framework']} | {mode} | {row['cells']} | {signed_percent(row['median_error'])} "
              f"| {signed_percent(row['worst_error'])} ({row['worst_cell']}) |")
    print()
    print("| workload | size | framework | mode | prediction | predicted MiB | measured MiB | predicted / measured |")
    print("|---|---|---|---|---|---:|---:|---:|")
    for r in sorted(records, key=lambda r: (r["framework"], r["mode"], r["size"], r["workload"])):
        found = r["prediction"]
        value = prediction.ratio(r)
        state = found["state"] + ("" if found.get("same_program", True) else " *")
        print(f"| {r['workload']} | {r['size']} | {r['framework']} | {r['mode']} | {state} "
              f"| {_mib(found.get('bytes'))} | {_mib(prediction.measured_bytes(r))} "
              f"| {'-' if value is None else f'{value:.2f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
