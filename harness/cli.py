"""`python -m harness COMMAND`: gradmem's commands, each its package's command.py.

Each command module (`<package>/command.py`, COMMANDS below) defines
`add_arguments(parser)` and `main(args) -> exit code`, and is imported only when its
command runs, so `list` never pays for `report`. The options several commands share
are declared once in harness/cli_options.py.
"""

import argparse
import importlib
import sys

from harness.choices import ChoiceError

COMMANDS = {
    "list": ("harness.inventory.command", "workloads with sizes, frameworks with versions, devices"),
    "check": ("harness.check.command", "every framework's gradient against the reference engine"),
    "run": ("harness.sweep.command", "measure peak memory and time, one cell per process"),
    "scale": ("harness.scale.command", "how memory grows with the batch, and the largest batch that fits"),
    "report": ("harness.report.command", "write the comparison page from result files"),
    "bisect": ("harness.bisect.command", "the first release or commit of a framework that moved a figure"),
    "releases": ("harness.releases.command", "every release of a framework measured, and the changes between them"),
    "report-change": ("harness.upstream.command", "one change between releases, ready to file upstream: a standalone "
                      "script, its runs under both releases, a report draft"),
    "diff": ("harness.diff.command", "why two records differ: figures, categories, saved bytes by op, environment"),
    "site": ("harness.site.command", "write the observatory: one static site of everything the repository holds"),
    "new-workload": ("harness.workloads.command", "write a commented workload file to edit into your model"),
    "new-step": ("harness.steps.command", "write a native training step (plain framework code) to edit into yours"),
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose error (a missing option, an int that is not one) is one
    line, as a ChoiceError's is, instead of the whole usage before it."""

    def error(self, message):
        print(f"error: {message} ({self.prog} --help lists the options)", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = Parser(prog="python -m harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="|".join(COMMANDS), required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(module_name=module_name)
    # Only the chosen command's module is imported (and adds its arguments), so
    # `list` never pays for `report`; its --help still shows every option.
    chosen = next((arg for arg in argv if arg in COMMANDS), None)
    if chosen is not None:
        importlib.import_module(COMMANDS[chosen][0]).add_arguments(sub.choices[chosen])
    try:
        args = parser.parse_args(argv)  # a limit is checked as it is read (cli_options.seconds_action)
        return importlib.import_module(args.module_name).main(args)
    except ChoiceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
