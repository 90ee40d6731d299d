"""`harness run --leak-budgets SHORT,LONG`: a native step of seconds gets a leak phase
long enough to reach its readings; a bad value is one clear error."""

import argparse

import pytest

from harness import choices
from harness.sweep import command
from harness.sweep.cell_runner import CellRunner


def parsed(*extra):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(["--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                              "--out", "x.jsonl", *extra])


def test_the_budgets_reach_the_memory_pass_job(tmp_path):
    args = parsed("--leak-budgets", "30,120")
    cells = command.plan(args)
    job = CellRunner(str(tmp_path), command.options(args)).start(1, cells[0]).job
    assert job["leak_budgets_s"] == [30.0, 120.0]


def test_without_the_option_the_pass_takes_its_share():
    args = parsed()
    command.plan(args)
    assert command.options(args).leak_budgets_s is None


@pytest.mark.parametrize("value, says", [
    ("30", "two numbers of seconds, SHORT,LONG"),
    ("a,b", "two numbers of seconds, SHORT,LONG"),
    ("0,10", "seconds > 0"),
    ("60,30", "the short check's at most the longer run's"),
])
def test_a_bad_value_names_what_it_takes(value, says):
    with pytest.raises(choices.ChoiceError, match=says):
        command.plan(parsed("--leak-budgets", value))
