"""The shared options (harness/cli_options.py): declared once, the same spellings in
every command, help from the registries, a bad value named with the valid choices."""

import argparse
import importlib

import pytest

from harness import choices, cli, cli_options, frameworks, workloads

#: the commands that take the cell axes
AXIS_COMMANDS = ("check", "run", "scale", "releases", "bisect")


def parser_of(command):
    parser = argparse.ArgumentParser(prog=f"harness {command}")
    importlib.import_module(cli.COMMANDS[command][0]).add_arguments(parser)
    return parser


def flags(parser):
    return {flag: action for action in parser._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", AXIS_COMMANDS)
def test_an_axis_is_spelled_alike_in_every_command(command):
    # a list-valued axis answers to its plural too; a one-name axis does not (a plural
    # there would promise a list)
    found = flags(parser_of(command))
    for axis in cli_options.AXES:
        if f"--{axis}" not in found:
            continue
        action = found[f"--{axis}"]
        assert action.dest == axis
        many = "or all" in action.help
        assert (f"--{axis}s" in found) == many, (command, axis)
        if many:
            assert found[f"--{axis}s"] is action
    assert "--timeout" in found


def test_the_help_lists_the_registries_names(monkeypatch):
    # a new workload or framework shows up in every --help with no edit of a command
    monkeypatch.setattr(workloads, "NAMES", workloads.NAMES + ("a_new_workload",))
    monkeypatch.setattr(frameworks, "NAMES", frameworks.NAMES + ("a_new_row",))
    for command in AXIS_COMMANDS:
        text = parser_of(command).format_help()
        assert "a_new_workload" in text and "a_new_row" in text, command
        assert all(size in text for size in choices.SIZES), command


@pytest.mark.parametrize("argv, valid", [
    (["check", "--size", "huge"], choices.SIZES),
    (["run", "--dtype", "float16", "--out", "unused.jsonl"], choices.DTYPES),
    (["scale", "--mode", "lazy", "--out", "unused.jsonl"], choices.MODES),
    (["bisect", "--workload", "chained_dot", "--framework", "autograd", "--good", "1.6", "--bad", "1.7",
      "--device", "tpu"], choices.DEVICES),
    (["run", "--workloads", "lstm", "--out", "unused.jsonl"], workloads.NAMES),
    (["check", "--frameworks", "theano"], frameworks.NAMES),
])
def test_a_bad_value_exits_2_naming_the_valid_choices(argv, valid, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written; if it were, not into the checkout
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert ", ".join(valid) in err, err
    assert not any(tmp_path.iterdir())


def test_an_axis_without_a_shared_declaration_is_refused():
    with pytest.raises(ValueError, match="no shared option for colour"):
        cli_options.add_axes(argparse.ArgumentParser(), colour="red")
