"""Byte units, defined once: every memory figure is in bytes, shown in binary units.

`parse_bytes` reads what a user types for a byte count (--memory-limit, --budget,
--cap, a pytest marker's limit): "1500000", "512M", "2G", "1.5GiB".
"""

from harness.choices import ChoiceError

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
#: the suffix a byte count may carry (case-insensitive; "512M", "512MiB" and "512MB" are
#: all binary: memory is counted in pages of powers of two)
SUFFIXES = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": TIB}


def parse_bytes(text, option="--memory-limit", none_ok=False):
    """'1500000', '512M', '2G', '1.5GiB' -> bytes (binary units); None stays None, and so
    does 'none' where `none_ok` (a limit that can be switched off). ChoiceError (naming
    `option` and the accepted forms) for anything else, <= 0 or not finite."""
    if text is None:
        return None
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text  # parsed already (an argparse action read it)
    raw = str(text).strip().lower()
    if none_ok and raw == "none":
        return None
    raw = raw.removesuffix("ib").removesuffix("b").strip()
    unit = raw[-1] if raw and raw[-1] in SUFFIXES else ""
    number = raw[: len(raw) - len(unit)].strip()
    accepted = "bytes, e.g. 1GiB, 512M, 1500000000" + (" or none (no limit)" if none_ok else "")
    try:
        value = int(float(number) * SUFFIXES[unit])
    except (ValueError, OverflowError):  # junk, nan; inf
        raise ChoiceError(f"{option} {text!r}: expected {accepted}") from None
    if value <= 0:
        raise ChoiceError(f"{option} {text!r}: must be positive: {accepted}")
    return value
