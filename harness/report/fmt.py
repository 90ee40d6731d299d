"""Formatting of figures for the page: bytes, seconds, ratios, escaped text."""

import html
import math

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def esc(value):
    """Text safe inside HTML elements and attributes."""
    return html.escape(str(value), quote=True)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def human_bytes(value):
    """1536 -> '1.5 KiB'; binary units because allocators and pages are binary."""
    if not is_number(value):
        return "–"
    size = float(value)
    for unit in _BYTE_UNITS:
        if abs(size) < 1024 or unit == _BYTE_UNITS[-1]:
            if unit == "B":
                return f"{size:.0f} {unit}"
            # three significant digits, four from 100 up (407.6 MiB, not 408: a CUDA
            # cell's allocator figure is exact to the byte, and a tenth of a MiB is read)
            return f"{size:.4g} {unit}" if abs(size) >= 100 else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def human_seconds(value):
    if not is_number(value):
        return "–"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def signed_percent(fraction, digits=1):
    """A relative change with its sign: 0.123 -> '+12.3%'. One that rounds to zero at
    `digits` is '0.0%', never '-0.0%' (a sign the shown figure does not have)."""
    if not is_number(fraction):
        return "–"
    text = f"{fraction:+.{digits}%}"
    return text[1:] if float(text[1:-1]) == 0 else text


def human_ratio(value):
    return f"{value:.2f}×" if is_number(value) else "–"


def human_error(value):
    return f"{value:.1e}" if is_number(value) else "–"
