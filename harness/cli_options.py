"""The options the commands share, declared once: the axes of a cell and the limits.

    cli_options.add_axes(parser, workload="all", framework="all", size="small", single=("size",))
    cli_options.add_timeout(parser, 600)
    parser.add_argument("--memory-limit", action=cli_options.memory_limit_action(), default=None)

An axis is added only when the command names it, with that command's default (None:
required). Its help lists the valid names from the registries (harness/workloads,
harness/frameworks, harness/choices), so a new workload or framework shows up in every
command's --help without an edit here. An axis that takes a comma-separated list ("all":
every valid name) also answers to its plural (--workloads, --frameworks, --sizes,
--dtypes, --devices, --modes), in every command alike; an axis in `single` takes one
name. The values are checked where they are read (choices.check_choice/parse_choices,
workloads.parse), and a bad one gets an error naming the valid choices.

A limit (a timeout, a time budget, a memory limit) is read as it is parsed, by an
argparse action (`seconds_action`, `memory_limit_action`): a positive number, or
`none` where "no limit" is meant; anything else (-1, 0, nan, inf, junk) is a
ChoiceError naming what is accepted, before anything runs or is written.
"""

import argparse
import math

from harness import choices, frameworks, workloads
from harness.units import parse_bytes

#: axis -> (metavar, the valid names); the order of a cell's keys
AXES = {
    "workload": ("W", lambda: workloads.NAMES),
    "framework": ("F", lambda: frameworks.NAMES),
    "size": ("S", lambda: choices.SIZES),
    "dtype": ("D", lambda: choices.DTYPES),
    "device": ("DEV", lambda: choices.DEVICES),
    "mode": ("M", lambda: choices.MODES),
}
#: the default of an axis the command cannot run without
REQUIRED = object()
#: what --workload accepts beyond the built-in names (harness/workloads/loader.py)
EXTERNAL_WORKLOAD = "or your own: a .py file or package.module:attr (docs/workloads.md)"


def add_axes(parser, single=(), notes=None, **defaults):
    """Add --AXIS for each axis named in `defaults` (axis=default; REQUIRED: the command
    needs it; None: the command decides, as its note says), in the order of AXES.
    `single`: axes that take one name; `notes`: {axis: text} appended to an axis's
    help (what this command does with it)."""
    unknown = set(defaults) - set(AXES)
    if unknown:
        raise ValueError(f"no shared option for {', '.join(sorted(unknown))}; axes: {', '.join(AXES)}")
    notes = notes or {}
    for axis, (metavar, valid) in AXES.items():
        if axis not in defaults:
            continue
        default, many = defaults[axis], axis not in single
        names = ", ".join(valid())
        if axis == "workload":
            names += f"; {EXTERNAL_WORKLOAD}"
        text = f"{metavar}[,{metavar}...] or all; {metavar}: {names}" if many else f"one of {names}"
        if notes.get(axis):
            text += f"; {notes[axis]}"
        if default is REQUIRED:
            text += " (required)"
        elif default is not None:
            text += f" (default {default})"
        flags = (f"--{axis}", f"--{axis}s") if many else (f"--{axis}",)
        parser.add_argument(*flags, dest=axis, default=None if default is REQUIRED else default,
                            required=default is REQUIRED,
                            metavar=metavar, help=text.replace("%", "%%"))


#: what a limit option takes for "no limit" (--timeout none, --memory-limit none, --budget none)
NO_LIMIT = "none"


def parse_seconds(text, option, none_ok=False, zero_ok=False):
    """A number of seconds typed for `option`: finite and > 0 (>= 0 with `zero_ok`);
    NO_LIMIT -> None where `none_ok`. ChoiceError naming what is accepted otherwise:
    a timeout of -1 or 0 would record every cell as `timeout`, one of nan never ends."""
    if none_ok and str(text).strip().lower() == NO_LIMIT:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if math.isfinite(value) and (value > 0 or (zero_ok and value == 0)):
        return value
    wanted = "a number of seconds >= 0" if zero_ok else "a positive number of seconds"
    if none_ok:
        wanted += f" or {NO_LIMIT} (no limit)"
    raise choices.ChoiceError(f"{option} {text!r}: expected {wanted}, e.g. {option} 600")


def _action(parse):
    """An argparse action storing parse(text, option). A bad value is the parser's
    ChoiceError, one line naming what is accepted (exit 2: harness/cli.py); a type=
    function could not raise it (argparse turns its ValueError into "invalid value")."""

    class Parsed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, parse(values, option_string or self.dest))

    return Parsed


def seconds_action(none_ok=False, zero_ok=False):
    """The action of an option taking seconds (parse_seconds' rules)."""
    return _action(lambda text, option: parse_seconds(text, option, none_ok=none_ok, zero_ok=zero_ok))


def memory_limit_action():
    """The action of --memory-limit: bytes (1GiB, 512M, 1500000000) or none."""
    return _action(lambda text, option: parse_bytes(text, option, none_ok=True))


def add_timeout(parser, default, what="seconds one worker may run before it is killed"):
    """--timeout: a worker's wall-clock limit in seconds, or `none`; past it the worker
    is killed and its cell recorded as `timeout`."""
    parser.add_argument("--timeout", action=seconds_action(none_ok=True), default=default, metavar="SECONDS",
                        help=f"{what}, a positive number, or {NO_LIMIT} for no limit (default {default:g})")


def add_memory_limit(parser):
    """--memory-limit: the address-space limit of each worker (RLIMIT_AS), or none."""
    parser.add_argument("--memory-limit", action=memory_limit_action(), default=None, metavar="BYTES",
                        help="address-space limit per worker: bytes, suffix K/M/G allowed (e.g. 4GiB), or "
                        f"{NO_LIMIT} (default {NO_LIMIT})")


def add_optimizer(parser, what="add one optimizer update after the backward (phase 'step')"):
    """--optimizer: none by default; one of choices.OPTIMIZERS adds its update to the step."""
    parser.add_argument("--optimizer", default=None, metavar="OPT",
                        help=f"one of {', '.join(choices.OPTIMIZERS)}: {what} (default none)")
