"""The options the commands share, declared once: the axes of a cell and the timeout.

    cli_options.add_axes(parser, workload="all", framework="all", size="small", single=("size",))
    cli_options.add_timeout(parser, 600)

An axis is added only when the command names it, with that command's default (None:
required). Its help lists the valid names from the registries (harness/workloads,
harness/frameworks, harness/choices), so a new workload or framework shows up in every
command's --help without an edit here. An axis that takes a comma-separated list ("all":
every valid name) also answers to its plural (--workloads, --frameworks, --sizes,
--dtypes, --devices, --modes), in every command alike; an axis in `single` takes one
name. The values are checked where they are read (choices.check_choice/parse_choices,
workloads.parse), and a bad one gets an error naming the valid choices.
"""

from harness import choices, frameworks, workloads

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


def add_timeout(parser, default, what="seconds one worker may run before it is killed"):
    """--timeout: a worker's wall-clock limit in seconds; past it the worker is killed
    and its cell recorded as `timeout`."""
    parser.add_argument("--timeout", type=float, default=default, metavar="SECONDS",
                        help=f"{what} (default {default:g})")


def add_optimizer(parser, what="add one optimizer update after the backward (phase 'step')"):
    """--optimizer: none by default; one of choices.OPTIMIZERS adds its update to the step."""
    parser.add_argument("--optimizer", default=None, metavar="OPT",
                        help=f"one of {', '.join(choices.OPTIMIZERS)}: {what} (default none)")
