"""The house rules of the source tree (docs/design.md, "Layout"), checked on the tree
itself so that a new module that breaks one fails here, naming the file and line."""

import ast
import importlib
import pathlib
import re
import subprocess

import pytest

from harness import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
HARNESS = ROOT / "harness"
#: the trees whose text a reader of the repository reads
SOURCES = ("harness", "tools", "benchmarks", "tests")


def _modules():
    """{dotted name: path} of every module of the harness package."""
    found = {}
    for path in sorted(HARNESS.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def private_reads(path, modules):
    """[(line, text)] where the module at `path` reads another harness module's private
    name: `from harness.x import _y`, or `x._y` where x names a harness module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            for alias in node.names:
                if _private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                elif f"{node.module}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if not isinstance(base, ast.Name):
                continue
            dotted = ".".join([base.id, *reversed(chain[1:])])
            module = aliases.get(base.id, base.id) + dotted[len(base.id):]
            if module in modules and modules[module] != path:
                found.append((node.lineno, f"{dotted}.{node.attr}"))
    return found


def test_no_module_reads_another_modules_private_name():
    # a leading underscore says "may change without telling anyone"; a reader in
    # another module turns that into a silent break (make the name public instead)
    modules = _modules()
    found = [f"{path.relative_to(ROOT)}:{line}: {text}" for path in modules.values()
             for line, text in private_reads(path, modules)]
    assert not found, "\n".join(found)


def test_the_scan_finds_a_private_read(tmp_path):
    # the scan itself: each form it must catch, and a module's own private name it must not
    modules = _modules()
    probe = tmp_path / "probe.py"
    probe.write_text("from harness.versions import index\nfrom harness.sweep import cells as c\n"
                     "from harness.results import _locked\nimport harness.units\n"
                     "index._hidden(); c._x; harness.units._y; index.public()\n")
    assert sorted(text for _, text in private_reads(probe, modules)) == sorted([
        "from harness.results import _locked", "index._hidden", "c._x", "harness.units._y"])


OUTSIDE = re.compile(r"/work/|/root/|\.\./shared|shared/notes|/tmp/\w+\.md|\bthe notes\b|\bissue #?\d+\b",
                     re.IGNORECASE)


def test_no_text_points_outside_the_repository():
    # a developer's path, a scratch file or "issue 24" names nothing a reader of the
    # repository can open; say the thing itself, or point at docs/
    found = []
    for tree in SOURCES:
        for path in sorted((ROOT / tree).rglob("*.py")) + sorted((ROOT / tree).rglob("*.sh")):
            if path == pathlib.Path(__file__).resolve():
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if OUTSIDE.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_byte_units_are_defined_once():
    # one MIB (harness/units.py): copies drift (1 << 20 here, 10**6 there)
    definition = re.compile(r"^\s*(MIB|MiB|KIB|GIB|GiB)\s*=", re.MULTILINE)
    found = [str(path.relative_to(ROOT)) for tree in SOURCES for path in sorted((ROOT / tree).rglob("*.py"))
             if definition.search(path.read_text(encoding="utf-8"))]
    assert found == ["harness/units.py"], found


def test_every_command_is_its_packages_command_module():
    # one shape: `python -m harness NAME` is harness/<package>/command.py, with
    # add_arguments(parser) and main(args); the package map names every package
    for name, (module_name, _) in cli.COMMANDS.items():
        package, leaf = module_name.rsplit(".", 1)
        assert leaf == "command" and package.count(".") == 1, (name, module_name)
        module = importlib.import_module(module_name)
        assert callable(module.add_arguments) and callable(module.main), module_name
    packages = sorted(p.name for p in HARNESS.iterdir() if (p / "__init__.py").exists())
    described = importlib.import_module("harness").__doc__
    missing = [p for p in packages if f"`{p}/`" not in described]
    assert not missing, f"harness/__init__.py's map does not name {missing}"


def test_no_tracked_link_points_outside_the_repository():
    # A link committed from one checkout (a worktree's .venv -> the main checkout's venv)
    # names a path on one developer's machine; worse, checking it out replaces the
    # ignored folder of that name, a venv, in every checkout that pulls it.
    try:
        listing = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no tracked files to read")
    outside = []
    for line in listing.stdout.splitlines():
        mode, _, path = line.split(None, 2)
        if mode != "120000":  # git's mode for a symbolic link
            continue
        target = pathlib.Path(path.split("\t", 1)[-1])
        link = ROOT / target
        if not link.resolve().is_relative_to(ROOT.resolve()):
            outside.append(f"{target} -> {link.readlink() if link.is_symlink() else '?'}")
    assert not outside, "tracked links that point outside the repository:\n" + "\n".join(outside)
