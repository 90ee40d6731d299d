"""Workloads from outside the package: a file, or a module attribute.

A workload reference is one of

- a built-in name (``chained_dot``, ...: `harness.workloads.NAMES`);
- a path to a Python file (``./my_model.py``, ``/abs/model.py``): anything ending in
  ``.py``. It is resolved once, in the command, to ``/abs/path.py#sha256=<12 hex>``,
  the *canonical reference*: that string travels in each cell (to forked workers and
  to Ray nodes, which must see the same path), names the workload in every record, and
  is checked again when a worker loads the file, so a file edited in the middle of a
  sweep is an error, not a mix, and ``--resume`` never merges two versions of a file;
- ``package.module:attr``: an importable module's attribute (a module or any object
  with the contract's names), the convention of ``python -m``-less entry points
  (``uvicorn app:app``, setuptools' ``entry_points``): the user's installed or
  ``PYTHONPATH`` code, named as importers already name it. Without ``:attr`` the
  module itself (``package.module:``).

No entry-point group is scanned: an installed package's workload is already reachable
as ``package.module:attr``, and a scan would make every command import every installed
plugin. The contract is `harness.workloads`'s docstring; `check_contract` names every
missing or ill-formed piece. A file that defines a native step's names instead
(``FRAMEWORK``, ``setup``, ``step``: plain framework code) is checked against that
contract (harness/steps/contract.py) and loaded the same way.
"""

import hashlib
import importlib
import importlib.util
import os
import sys
import types

from harness.choices import SIZES, WorkloadError

HASH_MARK = "#sha256="
HASH_CHARS = 12
#: the names a workload must define; bound_bytes and SOURCE/STRESSES may be left out
REQUIRED = ("SIZES", "BATCH_AXIS", "init", "loss")
OPTIONAL = {"SOURCE": "(not given)", "STRESSES": "(not given)", "SEGMENTS": ""}

_cache = {}


def is_external(ref):
    return isinstance(ref, str) and (ref.endswith(".py") or HASH_MARK in ref or ":" in ref)


def file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:HASH_CHARS]


def canonical(ref):
    """The reference that goes into cells and records: a file's absolute path with its
    content hash; a ``module:attr`` as given."""
    if ":" in ref and not ref.endswith(".py") and HASH_MARK not in ref:
        return ref
    path = ref.split(HASH_MARK, 1)[0]
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise WorkloadError(f"workload file {path!r} does not exist (a workload is a built-in name, "
                            f"a path to a .py file, or module:attr)")
    return f"{path}{HASH_MARK}{file_hash(path)}"


def load(ref, run=False):
    """The workload object named by an external reference, contract checked (cached).
    A native step file is read without running it (harness/steps/contract.py: a
    command's process never imports a framework) unless `run` (its worker)."""
    if (ref, run) in _cache:
        return _cache[ref, run]
    from harness.steps import contract as native

    static = None if run or not (HASH_MARK in ref or ref.endswith(".py")) else _read_static(ref, native)
    if static is not None:
        module = static
    elif HASH_MARK in ref or ref.endswith(".py"):
        module = _load_file(ref)
    else:
        module = _load_attr(ref)
    if native.is_native(module):
        native.check_contract(module, ref)
    else:
        check_contract(module, ref)
    _cache[ref, run] = module
    return module


def _read_static(ref, native):
    path, _, expected = ref.partition(HASH_MARK)
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise WorkloadError(f"workload file {path!r} does not exist")
    if expected and file_hash(path) != expected:
        _load_file(ref)  # says what changed
    return native.read_static(path, ref)


def _load_file(ref):
    path, _, expected = ref.partition(HASH_MARK)
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise WorkloadError(f"workload file {path!r} does not exist")
    found = file_hash(path)
    if expected and found != expected:
        raise WorkloadError(f"workload file {path} changed: its sha256 starts {found}, the sweep was "
                            f"started with {expected}; rerun (or --resume into a new file)")
    name = f"gradmem_workload_{found}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses/pickle look a module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise WorkloadError(f"workload file {path} failed to import: {type(e).__name__}: {e}") from e
    return module


def _load_attr(ref):
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise WorkloadError(f"workload {ref!r}: cannot import module {module_name!r}: {e}") from e
    if not attr:
        return module
    try:
        return getattr(module, attr)
    except AttributeError:
        raise WorkloadError(f"workload {ref!r}: module {module_name!r} has no attribute {attr!r}") from None


def check_contract(obj, ref):
    """Raise WorkloadError naming every missing or ill-formed piece of the contract;
    fill in the optional names' defaults."""
    problems = [f"{name} is missing" for name in REQUIRED if not hasattr(obj, name)]
    if not hasattr(obj, "init") and not hasattr(obj, "loss"):
        problems.append("it defines neither an op-set workload's init and loss nor a native step's FRAMEWORK, "
                        "setup and step (docs/workloads.md)")
    sizes = getattr(obj, "SIZES", None)
    if sizes is not None:
        if not isinstance(sizes, dict):
            problems.append("SIZES must be a dict {size: config dict}")
        else:
            absent = [s for s in SIZES if s not in sizes]
            if absent:
                problems.append(f"SIZES lacks {', '.join(absent)} (each of {', '.join(SIZES)} is needed)")
            axis = getattr(obj, "BATCH_AXIS", None)
            for size, cfg in sizes.items():
                if not isinstance(cfg, dict):
                    problems.append(f"SIZES[{size!r}] must be a dict")
                elif axis is not None and axis not in cfg:
                    problems.append(f"SIZES[{size!r}] has no key {axis!r} (BATCH_AXIS)")
    for name in ("init", "loss", "bound_bytes"):
        if hasattr(obj, name) and not callable(getattr(obj, name)):
            problems.append(f"{name} must be a function")
    if problems:
        raise WorkloadError(f"workload {ref} breaks the contract (harness/workloads/__init__.py): "
                            + "; ".join(problems))
    if isinstance(obj, types.ModuleType):
        for name, default in OPTIONAL.items():
            if not hasattr(obj, name):
                setattr(obj, name, default)


def short_name(ref):
    """A readable label: a file's stem, or the module:attr."""
    if HASH_MARK in ref or ref.endswith(".py"):
        return os.path.basename(ref.split(HASH_MARK, 1)[0])[:-3]
    return ref
