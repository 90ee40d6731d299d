"""`harness run`'s exit status, from the records of the cells it was asked to measure.

A cell that fails is a record with its status and the sweep goes on; the exit status
then says, for a script or a CI job, whether the sweep measured what it was asked:

    0  no cell failed: each was measured, or is `unavailable` on this machine (a
       framework not installed, no GPU: not a failure, its record says why), or was
       left for --resume by --budget
    1  the sweep stopped: --out or its scratch files could not be written (a full disk)
    2  bad input, refused before anything ran
    3  no cell was measured: every cell that ran failed (oom, timeout, error)
    4  some cells failed, the others were measured
    128 + N  stopped by signal N (130 Ctrl-C, 143 SIGTERM: harness/interrupts.py)

With 3 and 4 the counts are printed (failed, by status, and measured); the report
and `--resume` read the records as with 0.
"""

from collections import Counter

OK = 0
UNWRITABLE = 1
BAD_INPUT = 2
NONE_MEASURED = 3
SOME_FAILED = 4
#: the codes of a sweep that ran to its end, every cell recorded (a failed one with
#: its status): what a caller that goes on to read the records accepts
RAN_TO_THE_END = (OK, NONE_MEASURED, SOME_FAILED)
#: the statuses of a cell that failed; `unavailable` is not one
FAILED = ("oom", "timeout", "error")


def judge(records):
    """(exit status, the line that explains it, or "") of a sweep whose cells' records
    are `records` (each cell's newest)."""
    counts = Counter(record.get("status") for record in records)
    failed = sum(counts[status] for status in FAILED)
    if not failed:
        return OK, ""
    which = ", ".join(f"{counts[status]} {status}" for status in FAILED if counts[status])
    unavailable = f"; {counts['unavailable']} unavailable here" if counts["unavailable"] else ""
    if not counts["ok"]:
        return NONE_MEASURED, (f"error: no cell was measured: {failed} of {len(records)} failed ({which})"
                               f"{unavailable}; the table and each record's message say why (exit {NONE_MEASURED})")
    return SOME_FAILED, (f"warning: {failed} of {len(records)} cells failed ({which}), {counts['ok']} measured"
                         f"{unavailable}; the table and each record's message say why (exit {SOME_FAILED})")
