"""The one colour rule of a comparison table, on the comparison page's grid and the
site's front page alike: the lowest step peak of each row is marked, in one green.

A user comparing frameworks looks for the lowest in each row (one workload across the
columns of one table, so of one device: CPU and CUDA figures never share a table).
Only exact figures take part: an upper bound (an allocator that cannot reset its peak,
JAX on CUDA) and a cell without a figure are never marked and never hide the lowest;
a row with fewer than two exact figures marks nothing (there is nothing to compare);
equal lowest figures are all marked. Peak / bound stays a number in the cell, never a
colour: one colour, one meaning.
"""

from harness import figures

FIGURE = "step_peak"
CSS_CLASS = "lowest"
#: the rule, for each page's stylesheet
CSS = ".lowest { background: #d8f0d8; }"
#: what the colour means, for each page's legend and the cell's tooltip
MEANING = "the lowest step peak of its row"


def exact(record):
    """The cell's step peak when it is an exact figure, else None (not ok, no figure,
    or an upper bound)."""
    if record is None or record.get("status") != "ok" or figures.upper_bound(record, FIGURE):
        return None
    return figures.value(record, FIGURE)


def of_row(records):
    """The lowest exact step peak among `records` (one row; None entries allowed), or
    None when fewer than two cells have one."""
    values = [value for value in map(exact, records) if value is not None]
    return min(values) if len(values) > 1 else None


def marks(record, lowest):
    """Whether `record` is marked as its row's lowest (`lowest`: `of_row` of the row)."""
    return lowest is not None and exact(record) == lowest
