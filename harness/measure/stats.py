"""Summaries of repeated timings: the median, and the interquartile range as spread.

The IQR (75th minus 25th percentile, linear interpolation between samples as
numpy.percentile's default) is robust to the one slow repeat a shared machine
produces; with fewer than 4 repeats it is still defined but coarse. The raw samples
go into the record too (`time_samples_s`), so min..max can be read from them.
"""

import statistics


def median(values):
    return float(statistics.median(values))


def percentile(values, q):
    """Linear-interpolation percentile (numpy's default method), q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values):
    return float(percentile(values, 75) - percentile(values, 25))
