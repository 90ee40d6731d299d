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


#: (command, the arguments it needs beside the limit) for each command taking --timeout
TIMEOUT_COMMANDS = {
    "run": ["--out", "r.jsonl"],
    "check": [],
    "scale": ["--out", "r.jsonl"],
    "releases": ["--framework", "autograd"],
    "bisect": ["--workload", "chained_dot", "--framework", "autograd", "--good", "1.6", "--bad", "1.7"],
}
#: (command, option): the other limits, each a number of seconds or bytes
OTHER_LIMITS = [("run", "--memory-limit"), ("scale", "--memory-limit"), ("run", "--time-budget"),
                ("releases", "--time-budget"), ("run", "--budget")]


def stop_before_main(monkeypatch, command):
    """The command's main, replaced: a limit must be refused before it runs (a timeout
    of -1 used to start the whole default sweep and record every cell as `timeout`)."""
    module = importlib.import_module(cli.COMMANDS[command][0])
    reached = []
    monkeypatch.setattr(module, "main", lambda args: reached.append(args) or 0)
    return reached


@pytest.mark.parametrize("command", TIMEOUT_COMMANDS)
@pytest.mark.parametrize("value", ["-1", "0", "-0.5", "soon", "nan", "inf", "1e400", ""])
def test_a_timeout_that_is_not_a_positive_number_is_one_error_line(command, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reached = stop_before_main(monkeypatch, command)
    assert cli.main([command, *TIMEOUT_COMMANDS[command], f"--timeout={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --timeout"), err
    assert "a positive number of seconds or none (no limit)" in err
    assert reached == [] and not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", TIMEOUT_COMMANDS)
def test_a_timeout_is_seconds_or_none(command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    reached = stop_before_main(monkeypatch, command)
    for text, seconds in (("90", 90.0), ("1.5", 1.5), ("none", None), ("None", None)):
        assert cli.main([command, *TIMEOUT_COMMANDS[command], "--timeout", text]) == 0
        assert reached.pop().timeout == seconds
    assert "none for no limit" in parser_of(command).format_help()


@pytest.mark.parametrize("command, option", OTHER_LIMITS)
def test_every_other_limit_refuses_a_value_that_is_no_limit_in_one_line(command, option, capsys, tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    reached = stop_before_main(monkeypatch, command)
    # 0 is a valid --time-budget (exactly --repeat timed steps); -1 and junk are not
    bad = ["-1", "lots", "nan", "inf"] + ([] if option == "--time-budget" else ["0"])
    for value in bad:
        assert cli.main([command, *TIMEOUT_COMMANDS[command], f"{option}={value}"]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {option} {value!r}"), err
    assert reached == [] and not any(tmp_path.iterdir())


def test_limits_are_read_as_numbers_and_none_turns_one_off(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    reached = stop_before_main(monkeypatch, "run")
    assert cli.main(["run", "--out", "r.jsonl", "--memory-limit", "2GiB", "--time-budget", "0",
                     "--budget", "900"]) == 0
    args = reached.pop()
    assert (args.memory_limit, args.time_budget, args.budget) == (2 << 30, 0.0, 900.0)
    assert cli.main(["run", "--out", "r.jsonl", "--memory-limit", "none", "--budget", "none"]) == 0
    args = reached.pop()
    assert (args.memory_limit, args.budget) == (None, None)


def test_an_argparse_error_is_one_line_too(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", "--repeat", "many", "--out", "r.jsonl"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--repeat: invalid int value: 'many'" in err, err
