"""What makes a file a native step, whether it is a well-formed one, and its cells.

A file that defines ``FRAMEWORK``, ``setup`` or ``step`` and neither ``init`` nor
``loss`` is a native step (`is_native`). A command's process never imports a framework
(docs/design.md), and a native step imports its own at the top, so the loader
(harness/workloads/loader.py) reads a native step *file* without running it
(`read_static`: its top-level literals and the functions it defines); only the worker
runs it. Everything the commands need to know about one is here: its framework, its
sizes, its config with the cell's device and dtype, its bound (declared or absent) and
which cells it has (its own framework's row, mode eager, no remat: the file decides
what its step runs).
"""

import ast
import types

from harness.choices import DTYPES, SIZES, ChoiceError

NATIVE_NAMES = ("FRAMEWORK", "setup", "step")
OP_SET_NAMES = ("init", "loss")
REQUIRED = ("FRAMEWORK", "SIZES", "setup", "step")
#: the keys the harness adds to a size's config: the cell's
CELL_KEYS = ("device", "dtype")
#: the one mode a native step runs in: the file's code as written (it may compile itself)
MODE = "eager"
#: a record's bound_source when the file declares no bound_bytes
NO_BOUND = "absent"
#: a record's grad_check: there is no op-set gradient of the file's own code to compare
GRAD_CHECK = "not applicable: native step (the file's own code, no op-set gradient to compare)"
DEFAULTS = {"SOURCE": "(not given)", "STRESSES": "(not given)", "SEGMENTS": "", "BATCH_AXIS": None}


def is_native(obj):
    """True for an object that defines a native step's names and no op-set loss."""
    return any(hasattr(obj, name) for name in NATIVE_NAMES) and not any(hasattr(obj, n) for n in OP_SET_NAMES)


def check_contract(obj, ref):
    """Raise WorkloadError naming every missing or ill-formed piece of a native step;
    fill in the optional names' defaults."""
    from harness import frameworks
    from harness.choices import WorkloadError

    problems = [f"{name} is missing" for name in REQUIRED if not hasattr(obj, name)]
    framework = getattr(obj, "FRAMEWORK", None)
    if framework is not None and framework not in frameworks.NAMES:
        problems.append(f"FRAMEWORK {framework!r} is not a framework gradmem has an adapter for "
                        f"(valid: {', '.join(frameworks.NAMES)})")
    sizes = getattr(obj, "SIZES", None)
    if sizes is not None:
        problems += _size_problems(sizes, getattr(obj, "BATCH_AXIS", None))
    for name in ("setup", "step", "sync", "bound_bytes"):
        if hasattr(obj, name) and not callable(getattr(obj, name)):
            problems.append(f"{name} must be a function")
    if problems:
        raise WorkloadError(f"native step {ref} breaks the contract (harness/steps/__init__.py): " + "; ".join(problems))
    if isinstance(obj, (types.ModuleType, types.SimpleNamespace)):
        for name, default in DEFAULTS.items():
            if not hasattr(obj, name):
                setattr(obj, name, default)


def _size_problems(sizes, axis):
    if not isinstance(sizes, dict) or not sizes:
        return [f"SIZES must be a non-empty dict {{size: config dict}} (sizes: {', '.join(SIZES)})"]
    problems = []
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        problems.append(f"SIZES has {', '.join(map(repr, unknown))}: a size is one of {', '.join(SIZES)}")
    for size, cfg in sizes.items():
        if not isinstance(cfg, dict):
            problems.append(f"SIZES[{size!r}] must be a dict")
            continue
        taken = [key for key in CELL_KEYS if key in cfg]
        if taken:
            problems.append(f"SIZES[{size!r}] uses {', '.join(taken)}: the harness sets those keys to the cell's")
        if axis is not None and axis not in cfg:
            problems.append(f"SIZES[{size!r}] has no key {axis!r} (BATCH_AXIS)")
    return problems


#: the top-level names read from a native step file without running it
LITERALS = ("FRAMEWORK", "SIZES", "BATCH_AXIS", "SOURCE", "STRESSES")
FUNCTIONS = ("setup", "step", "sync", "bound_bytes", "init", "loss")


def read_static(path, ref):
    """The parent's view of a native step file, read without running it: a namespace
    with its literals and a stub for each function it defines (they run in the worker
    only). None when the file is not a native step by what it defines, or when a name
    the commands need (FRAMEWORK, SIZES, BATCH_AXIS) is not a literal: the loader then
    imports it as it imports any workload file."""
    from harness.choices import WorkloadError

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as err:
        raise WorkloadError(f"workload file {path} does not parse: {err.msg} (line {err.lineno})") from None
    found = {"__file__": path}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FUNCTIONS:
            found[node.name] = _runs_in_worker(node.name, ref)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id in LITERALS + FUNCTIONS and node.value is not None:
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    found[target.id] = _NOT_LITERAL
    static = types.SimpleNamespace(**found)
    if not is_native(static) or any(getattr(static, n, None) is _NOT_LITERAL for n in ("FRAMEWORK", "SIZES", "BATCH_AXIS")):
        return None
    return static


_NOT_LITERAL = object()


def _runs_in_worker(name, ref):
    def stub(*args, **kwargs):
        raise RuntimeError(f"{name}() of the native step {ref} runs in a worker only (the command read the file "
                           f"without importing its framework)")

    stub.__name__ = name
    stub.runs_in_worker = True
    return stub


def framework(module):
    """The row a native step runs in, or None for an op-set workload."""
    return module.FRAMEWORK if is_native(module) else None


def sizes(module):
    return tuple(s for s in SIZES if s in module.SIZES)


def check_size(module, size, label):
    """`size` if the step has it, else a ChoiceError naming the sizes it has."""
    if size not in module.SIZES:
        raise ChoiceError(f"native step {label} has no size {size!r}; its sizes: {', '.join(sizes(module))}")
    return size


def config(module, size, label, batch=None, device="cpu", dtype="float32"):
    """The config `setup` gets: a copy of SIZES[size], the batch axis set to `batch`
    when given, and the cell's device and dtype."""
    check_size(module, size, label)
    if dtype not in DTYPES:
        raise ChoiceError(f"dtype {dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    cfg = dict(module.SIZES[size])
    if batch is not None:
        if module.BATCH_AXIS is None:
            raise ChoiceError(f"native step {label} defines no BATCH_AXIS: there is no batch to set "
                              f"(harness scale needs one)")
        cfg[module.BATCH_AXIS] = batch
    cfg.update(device=device, dtype=dtype)
    return cfg


def bound(module, cfg):
    """(bytes, "declared") from the file's bound_bytes(cfg), or (None, NO_BOUND): a
    native step has no op-set graph for the reference engine to derive a bound from."""
    function = getattr(module, "bound_bytes", None)
    if function is None:
        return None, NO_BOUND
    if getattr(function, "runs_in_worker", False):
        raise ChoiceError(f"the bound of the native step {module.__file__} is its bound_bytes(cfg), run in its "
                          f"worker: read it from a record (bound_bytes)")
    return int(function(cfg)), "declared"


def keeps(module, framework_name, mode, remat):
    """Whether (framework, mode, remat) is a cell of this native step."""
    return framework_name == module.FRAMEWORK and mode == MODE and (remat or "none") == "none"


def check_cell(module, label, framework_name, mode="eager", size=None):
    """ChoiceError unless the one cell (bisect's) is a cell of this native step."""
    if not keeps(module, framework_name, mode, "none"):
        raise ChoiceError(wrong_row(module, label, [framework_name], [mode]))
    if size is not None:
        check_size(module, size, label)


def wrong_row(module, label, framework_names, modes):
    return (f"{label} is a native {module.FRAMEWORK} step: its one row is --framework {module.FRAMEWORK} "
            f"--mode {MODE} (its code runs as written); asked for --framework {','.join(framework_names)} "
            f"--mode {','.join(modes)}")
