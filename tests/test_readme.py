"""The README's set-up part says what the two commands really need and take: every
tool their recipes fetch or install with, how long they run, and a first run of a
minute whose commands are valid."""

import argparse
import pathlib
import re
import shlex

from harness.sweep import command as sweep

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: what each script a Makefile recipe calls needs beyond python3.11 and make: words the
#: README must use for it (a new script in a recipe fails test_every_script_of_a_recipe_is_known)
NEEDS = {
    "tools/ensure_clang.sh": ("clang", "apt-get", "root"),
    "tools/ensure_chromium.sh": ("Chromium", "apt-get", "root"),
    "tools/python_wheelhouse.sh": ("wheels with pip",),
    "tools/asv_site.py vendor": ("npm", "registry"),
    "pip install": ("PyPI", "pip"),
}


def setup_part():
    """The README from its two commands to the next section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## The two commands"):text.index("## Other commands")]


def recipe_calls(target, seen=None):
    """The scripts `make TARGET` runs, its prerequisites' included (read from the
    Makefile: a prerequisite is matched to the rule written with the same name)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    seen = set() if seen is None else seen
    rule = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n?)*)", makefile, re.M)
    if rule is None or target in seen:
        return set()
    seen.add(target)
    found = {script for script in NEEDS if script in rule.group(2)}
    for name in rule.group(1).split():
        found |= recipe_calls(name, seen)
    return found


def test_every_tool_the_commands_fetch_or_install_with_is_named():
    text = " ".join(setup_part().split())
    assert "need only" not in text  # they did not: npm, apt-get, pip
    for target in ("run", "test", "site"):
        for script in recipe_calls(target):
            missing = [word for word in NEEDS[script] if word not in text]
            assert not missing, (target, script, missing)
    assert recipe_calls("test") >= {"tools/ensure_chromium.sh", "tools/python_wheelhouse.sh",
                                    "tools/asv_site.py vendor", "pip install"}


def test_every_script_of_a_recipe_is_known():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    called = set(re.findall(r"\b(tools/[\w./-]+)", makefile))
    assert called <= {script.split()[0] for script in NEEDS} | {"tools/asv_site_assets.json"}, called


def test_the_times_are_given():
    text = " ".join(setup_part().split())
    how_long = text[text.index("How long."):]
    for what in ("set-up", "`make run`", "`make test`"):
        assert re.search(re.escape(what) + r"[^.]*\d+ min", how_long), what


def test_the_first_run_is_valid_and_small():
    block = re.search(r"A first run in a minute or two\..*?```bash\n(.*?)```", setup_part(), re.S).group(1)
    commands = [shlex.split(line.split("#")[0]) for line in block.strip().splitlines()]
    run, report = commands
    assert run[:3] == [".venv/bin/python", "-m", "harness"] and run[3] == "run"
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    todo = sweep.plan(parser.parse_args(run[4:]))
    assert {cell["size"] for cell in todo} == {"tiny"} and len(todo) <= 9
    out = run[run.index("--out") + 1]
    assert report[3] == "report" and report[4] == out
