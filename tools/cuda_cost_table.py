"""Print harness/sweep/budget.py's RECORDED_CUDA table from CUDA records.

    python tools/cuda_cost_table.py RECORDS.jsonl [...]

The mean worker walls (memory pass, time pass, the time pass's set-up) of the plain ok CUDA cells per
framework, mode and size (budget.learn), with the number of cells behind each, as the
Python literal budget.py holds. Run it over a GPU run's records and paste the output
to make `harness run --budget`'s first estimate that machine's.
"""

import sys

from harness import results
from harness.sweep import budget


def main(paths):
    records = []
    for path in paths:
        records.extend(results.read_records(path))
    table = {key[1:]: value for key, value in budget.learn(records).items() if key[0] == "cuda"}
    print("RECORDED_CUDA = {")
    for key in sorted(table):
        memory, timing, setup, count = table[key]
        print(f"    {key!r}: ({memory:.2f}, {timing:.2f}, {setup:.2f}, {count}),")
    print("}")
    return 0 if table else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
