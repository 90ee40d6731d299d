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


# ---- the engine's imports (docs/design.md, "The reference engine") ---------------------

ENGINE = "harness.engine"
#: the only modules outside engine/ the engine may import: leaves under every room
#: (choices: the error every bad name raises; remat_strategies: the remat names and the
#: segmentation, which the adapters read too), so the engine needs nothing above it
ENGINE_LEAVES = ("harness.choices", "harness.remat_strategies")


def harness_imports(path, modules, root=ROOT):
    """{imported harness module: first line} of the module at `path`, every import
    statement at any depth (a function-level import counts: it runs, and can close a
    circle, as a top-level one does). `from a.b import c` names the module a.b.c where
    that is one, else a.b."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(root).parts[:-1])  # a module's, or an __init__'s own
    found = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package up
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for name in names:
            if name in modules:
                found.setdefault(name, node.lineno)
    return found


def import_circles(graph):
    """Every strongly connected set of two or more modules in {module: {imported}} (a
    module that imports itself counts too), each as a sorted list."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == module:
                    break
            if len(members) > 1 or module in graph.get(module, ()):
                circles.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def _engine_graph():
    modules = _modules()
    return modules, {name: harness_imports(path, modules) for name, path in modules.items()
                     if name == ENGINE or name.startswith(ENGINE + ".")}


def test_the_engine_imports_nothing_of_harness_above_it():
    # the frameworks, the commands and the workloads use the engine, never the other
    # way: an engine that imports an adapter or a command drags the CLI into every
    # step it runs, and cannot be read (or vendored) on its own
    modules, graph = _engine_graph()
    outside = [f"{modules[name].relative_to(ROOT)}:{line}: imports {other}"
               for name, imports in graph.items() for other, line in imports.items()
               if not other.startswith(ENGINE + ".") and other != ENGINE and other not in ENGINE_LEAVES]
    assert not outside, "\n".join(outside)
    # and the leaves it may import are leaves: nothing of harness but each other
    above = [f"{leaf} imports {other}" for leaf in ENGINE_LEAVES
             for other in harness_imports(modules[leaf], modules) if other not in ENGINE_LEAVES]
    assert not above, above


def test_the_engine_has_no_import_circle():
    # each module can be read knowing only those below it (harness/engine/__init__.py
    # lists them in that order)
    _, graph = _engine_graph()
    circles = import_circles({name: set(imports) for name, imports in graph.items()})
    assert not circles, circles


def test_the_import_scan_finds_a_circle_through_a_function_level_import(tmp_path):
    # the scan itself: a top-level import one way and an import inside a function the
    # other way are a circle; a relative import resolves; a chain is none
    package = tmp_path / "harness" / "engine"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from harness.engine import b\n")
    (package / "b.py").write_text("def later():\n    from harness.engine.a import thing\n")
    (package / "c.py").write_text("from . import b\nimport harness.choices\n")
    modules = {"harness.engine.a": package / "a.py", "harness.engine.b": package / "b.py",
               "harness.engine.c": package / "c.py", "harness.choices": package / "c.py"}
    graph = {name: set(harness_imports(modules[name], modules, tmp_path))
             for name in ("harness.engine.a", "harness.engine.b", "harness.engine.c")}
    assert graph == {"harness.engine.a": {"harness.engine.b"}, "harness.engine.b": {"harness.engine.a"},
                     "harness.engine.c": {"harness.engine.b", "harness.choices"}}
    assert import_circles(graph) == [["harness.engine.a", "harness.engine.b"]]
    assert import_circles({"x": {"y"}, "y": {"z"}, "z": set()}) == []


# ---- commands call each other's code, never each other's command line -----------------

#: the modules that call commands by name: the entry point
ENTRY = ("harness.cli", "harness.__main__")


def command_lines(path, name, modules, root=ROOT):
    """[(line, what)] where the module `name` (at `path`) calls another command as a
    command: imports another package's command module (to call its main or parser),
    builds an argument list for ``python -m harness`` or another command module, or
    parses a list of option strings with a parser. A worker, a zygote and a module's own
    probe (``python -m`` of itself) are no commands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
    found = []
    for other, line in harness_imports(path, modules, root).items():
        if other.endswith(".command") and other.count(".") == 2 and not other.startswith(package + "."):
            found.append((line, f"imports {other}"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            texts = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in node.elts]
            for first, second in zip(texts, texts[1:]):
                if first == "-m" and second is not None and (
                        second == "harness" or (second.endswith(".command") and second != name)):
                    found.append((node.lineno, f"builds `python -m {second}`"))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("parse_args", "parse_known_args"):
            options = [e.value for arg in node.args if isinstance(arg, (ast.List, ast.Tuple)) for e in arg.elts
                       if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.startswith("--")]
            if options:
                found.append((node.lineno, f"parses a command line it built ({', '.join(options[:3])} ...)"))
    return found


def test_no_module_builds_a_command_line_to_call_another_command():
    # a command is called through its code (harness/sweep/api.py: sweep.run(cells,
    # options, out)), never by building its argv: a command line built as strings breaks
    # silently when an option is renamed, and turns a bad value into a usage error of a
    # command the user never typed
    modules = _modules()
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for name, path in modules.items() if name not in ENTRY
             for line, what in command_lines(path, name, modules)]
    assert not found, "\n".join(found)


def test_the_command_line_scan_finds_each_form(tmp_path):
    # the scan itself: each way of calling another command as a command, and none of the
    # ways a worker or a module's own probe is started
    modules = _modules()
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\nfrom harness.sweep import command as run\nfrom harness.versions import pins\n"
        "a = [sys.executable, '-m', 'harness', 'run', '--out', 'x']\n"
        "b = [sys.executable, '-m', 'harness.scale.command']\n"
        "ns = parser.parse_args(['--workload', 'unet'])\n"
        "ok = [sys.executable, '-m', 'harness.measure.worker', 'job', 'result']\n"
        "me = [sys.executable, '-m', 'harness.inventory.command', '--probe', 'torch']\n"
        "fine = parser.parse_args(argv)\n")
    assert sorted(what for _, what in command_lines(probe, "harness.inventory.command", modules, tmp_path)) == sorted([
        "imports harness.sweep.command", "builds `python -m harness`", "builds `python -m harness.scale.command`",
        "parses a command line it built (--workload ...)"])


# ---- the layers of harness/ (docs/design.md, "The layout") -----------------------------

#: harness/ from the bottom up. A module imports only modules of its own layer or of one
#: below (a function-level import too: it runs, and can close a circle, as a top-level
#: one does), so each layer can be read, tested and changed knowing only those beneath
#: it. A unit is a package or a module; a module belongs to the longest unit naming it
#: (steps/ spans three: what a native step file is sits with the workloads, what runs
#: it with the worker's measuring, and new-step's templates with it there).
LAYERS = (
    ("leaves: what every room shares", (
        "harness", "harness.choices", "harness.units", "harness.remat_strategies", "harness.figures",
        "harness.results", "harness.origin", "harness.interrupts", "harness.console", "harness.ops")),
    ("the reference engine", ("harness.engine",)),
    ("what is measured: frameworks and workloads", (
        "harness.frameworks", "harness.workloads", "harness.steps.contract")),
    ("inside a worker", ("harness.measure", "harness.steps")),
    ("framework versions in environments of their own", ("harness.versions",)),
    ("the sweep, and the options the commands share", ("harness.sweep", "harness.cli_options")),
    ("commands over the sweep", ("harness.check", "harness.scale", "harness.inventory")),
    ("the comparison page and what pages share", ("harness.report",)),
    ("commands over versions and pages", ("harness.bisect", "harness.releases", "harness.diff",
                                          "harness.upstream")),
    ("the observatory", ("harness.site",)),
    ("entry points", ("harness.cli", "harness.__main__", "harness.asv_env", "harness.pytest_plugin")),
)


def layer_of(module, layers=LAYERS):
    """(layer index, unit) of `module`, or None when no unit names it."""
    found = None
    for number, (_, units) in enumerate(layers):
        for unit in units:
            named = module == unit or (unit != "harness" and module.startswith(unit + "."))
            if named and (found is None or len(unit) > len(found[1])):
                found = (number, unit)
    return found


def imports_from_above(graph, where, layers=LAYERS):
    """["file:line: module (layer) imports other (layer above)"] of {module: {imported: line}}."""
    found = []
    for module, imports in sorted(graph.items()):
        own = layer_of(module, layers)
        for other, line in imports.items():
            theirs = layer_of(other, layers)
            if own and theirs and theirs[0] > own[0]:
                found.append(f"{where(module)}:{line}: {module} ({layers[own[0]][0]}) imports {other} "
                             f"({layers[theirs[0]][0]})")
    return found


def _harness_graph():
    modules = _modules()
    return modules, {name: harness_imports(path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer():
    # a new package says where it stands: add it to LAYERS (and to docs/design.md's layout)
    modules, _ = _harness_graph()
    missing = [name for name in modules if layer_of(name) is None]
    assert not missing, f"modules in no layer of LAYERS: {missing}"


def test_no_module_imports_from_a_layer_above_it():
    # an import upwards ties a room to those that use it: the sweep importing the bisect
    # command made sweep/ and versions/ one loop, which neither could be read without
    modules, graph = _harness_graph()
    found = imports_from_above(graph, lambda name: modules[name].relative_to(ROOT))
    assert not found, "\n".join(found)


def test_harness_has_no_import_circle():
    # every module can be read knowing only those it imports, and imported alone
    _, graph = _harness_graph()
    circles = import_circles({name: set(imports) for name, imports in graph.items()})
    assert not circles, circles


def test_the_layer_scan_finds_an_import_from_above():
    # the scan itself: a leaf importing the sweep, and the worker importing a command
    # inside a function, are found; the longest unit wins (steps.contract is below
    # steps), an import down or within a layer is none
    graph = {"harness.results": {"harness.sweep.api": 3}, "harness.measure.worker": {"harness.bisect.command": 9},
             "harness.steps.contract": {"harness.steps.runner": 4}, "harness.sweep.api": {"harness.results": 1},
             "harness.measure.phases": {"harness.steps.runner": 2}}
    assert layer_of("harness.steps.contract")[1] == "harness.steps.contract"
    assert layer_of("harness.steps.runner")[1] == "harness.steps"
    found = imports_from_above(graph, lambda name: name)
    assert [line.split(": ", 1)[0] for line in found] == [
        "harness.measure.worker:9", "harness.results:3", "harness.steps.contract:4"], found


def test_every_test_module_has_a_name_of_its_own():
    # the test folders are not packages: two test files of one basename collected in one
    # pytest process fail with "import file mismatch" (CI's xdist workers each collect many)
    tests = pathlib.Path(__file__).resolve().parent
    seen = {}
    for path in sorted(tests.rglob("*.py")):
        if path.name == "conftest.py" or "__pycache__" in path.parts:
            continue
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
