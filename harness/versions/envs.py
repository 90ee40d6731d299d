"""One environment per (framework, version, Python): where a pinned version's workers run.

    ~/.cache/gradmem/envs/jax-0.9.2-py3.11/       ($XDG_CACHE_HOME, or $GRADMEM_ENV_DIR)
        bin/python ...                             a venv of the Python running gradmem
    ~/.cache/gradmem/envs/jax-0.11.0-py3.12/      another Python of the host, for a release
                                                   the running one cannot install (interpreters.py)
        gradmem-env.json                           what was installed: exact versions

Built on first use, by pip, never into the project's .venv or the user's own
environment: ``python -m venv`` of the running interpreter, then one
``pip install PACKAGE==VERSION dep==X ...`` where the deps are gradmem's own runtime
requirements (NumPy) pinned to the versions the running environment has, so between two
versions of a framework only the framework (and what it alone needs) changes; then
gradmem itself with ``--no-deps`` (nothing re-resolved). A version whose requirements
conflict with those pins fails like any install: the cell is `unavailable` with pip's
last lines. The environment is built in a scratch directory beside its final place and
renamed there only when complete, under a lock (two sweeps build it once); a stop signal
kills pip and removes the scratch directory. A process that takes an environment into
use (`for_version`) holds a shared lock on ``jax-0.9.2.use`` until it exits or removes
it itself, and `remove` leaves an environment another process holds: a release sweep and a
confirmation of one framework, run at once, each prune what they built.

Workers in such an environment run the *running* gradmem's code (the ``harness``
package put first on PYTHONPATH through a directory holding only a link to it:
code_link.py), so a record's git commit says what measured it, whatever copy of gradmem
the cached environment was built with.

PyTorch is never installed without being asked (``--torch-index``): from PyPI a torch
release is a CUDA build of several GB; the PyTorch CPU index serves CPU builds (2.13.0: 192 MB against 2.74 GB)
(docs/versions.md).
"""

import atexit
import contextlib
import fcntl
import glob
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass

from harness.frameworks.base import Unavailable
from harness.versions import bytecode, install, interpreters, shared_files

MANIFEST = "gradmem-env.json"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIP_TIMEOUT_S = 1800
#: made once per process: "wheel" (gradmem_wheel)
_made = {}
#: the environments this process uses: name ("jax-0.9.2") -> the open file of its shared NAME.use lock
_in_use = {}
#: the environment paths this process built (`_made_once`): what its own prune may remove.
#: A listing taken at start-up is not that: another process's build finished meanwhile
#: would be pruned with them (a `harness run` beside a batch lost its environment so).
_built = set()
#: a Requires-Python every environment this process builds or takes must satisfy, or
#: None (require_python: `harness releases --python`)
_required_python = None


def require_python(spec):
    """From now on in this process, build and take only environments whose Python the
    PEP 440 specifier `spec` admits (None: any). torch 2.0's torch.compile refuses Python
    3.11, which its wheels support: `--python "<3.11"` measures it as its users could."""
    global _required_python
    _required_python = spec


def cache_root():
    given = os.environ.get("GRADMEM_ENV_DIR")
    if given:
        return os.path.abspath(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gradmem", "envs")


def python_tag(version=None):
    """"py3.11" for the running Python, or for `version` ("3.12.1")."""
    if version:
        return "py" + ".".join(version.split(".")[:2])
    return f"py{sys.version_info.major}.{sys.version_info.minor}"


@dataclass
class Env:
    path: str
    manifest: dict

    @property
    def python(self):
        """The interpreter (a layer's is its base environment's)."""
        return self.manifest.get("python_path") or os.path.join(self.path, "bin", "python")

    @property
    def paths(self):
        """Directories first on PYTHONPATH (a layer's install), after gradmem's code."""
        return [os.path.join(self.path, "site")] if self.manifest.get("layer_of") else []

    @property
    def versions(self):
        return dict(self.manifest.get("versions", {}))


def env_path(name, tag=None):
    return os.path.join(cache_root(), f"{name}-{tag or python_tag()}")


def cached(name):
    """The complete environment called `name` (e.g. "jax-0.9.2"), or None: the running
    Python's, else one built with another Python for a release this one cannot install
    (interpreters.py)."""
    others = sorted(glob.glob(glob.escape(os.path.join(cache_root(), name)) + "-py3.*"))
    for path in [env_path(name)] + [p for p in others if p != env_path(name)]:
        try:
            with open(os.path.join(path, MANIFEST), encoding="utf-8") as handle:
                found = Env(path, json.load(handle))
        except (OSError, ValueError):
            continue
        python = found.manifest.get("python")
        if _required_python and not (python and _admits(_required_python, python)):
            continue  # another Python than the one required (require_python)
        return found
    return None


def for_version(adapter, version, torch_index=None, requires_python=None):
    """The environment of `adapter`'s framework at `version`, built if needed, and held
    in use by this process until it exits (no other process's `remove` deletes it under
    its workers); raises Unavailable (with the installer's last lines) when it cannot be
    installed. A release whose Requires-Python (`requires_python`, as the index says, or
    pip's refusal) excludes the running Python is built with another Python of this host
    (interpreters.py) when there is one."""
    _hold(f"{adapter.name}-{version}")  # before it is looked for: a removal under way ends first
    return _found_or_built(adapter, version, torch_index, requires_python)


def _use_lock(root, name):
    """The file in `root` whose shared locks say who uses `name`'s environments (any Python's)."""
    return os.path.join(root, name + ".use")


def _hold(name):
    if name not in _in_use:
        os.makedirs(cache_root(), exist_ok=True)
        handle = open(_use_lock(cache_root(), name), "a")
        fcntl.flock(handle, fcntl.LOCK_SH)
        _in_use[name] = handle


def _found_or_built(adapter, version, torch_index, requires_python):
    package = adapter.package
    name = f"{adapter.name}-{version}"
    found = cached(name)
    if found is not None:
        return _with_valid_bytecode(found, name)
    options = []
    if adapter.index_must_be_named:
        if not torch_index:
            raise Unavailable(f"{adapter.name}=={version} is not installed without being asked: "
                              f"{adapter.index_must_be_named}")
        if torch_index != "pypi":
            options = ["--index-url", torch_index, "--extra-index-url", "https://pypi.org/simple"]
    pinned = adapter.pinned_requirement(version)
    if adapter.index_must_be_named and torch_index == "pypi":
        # PyPI's build exactly: `torch==2.13.0` also admits a local build such as
        # 2.13.0+cpu in the host's find-links, which pip then prefers to the index's
        # CUDA wheel (another build of the release); `===` matches the string alone
        pinned = pinned.replace("==", "===", 1)
    requirements = [pinned] + runtime_pins(exclude=(package,), also=adapter.adapter_requires)
    dists = adapter.distributions + (package,) + tuple(adapter.adapter_requires) + ("scipy",)
    # the release's own Requires-Python and the one this process requires, both (a comma is "and")
    requires_python = ",".join(filter(None, (requires_python, _required_python))) or None
    needs = requires_python if requires_python and not _admits(requires_python, sys.version.split()[0]) else None
    if needs is None:
        try:
            return build_loading(adapter.name, name, requirements, options, dists)
        except Unavailable as err:
            needs = interpreters.needs_other_python(str(err), version)
            if needs is None:
                raise
    found, looked = interpreters.find(needs)
    if found is None:
        raise Unavailable(f"{adapter.name} {version} requires Python {needs}; this is {sys.version.split()[0]} and "
                          f"no other Python here admits it (looked at: {', '.join(looked) or 'none found'}; "
                          f"GRADMEM_PYTHONS=PATH[:PATH] names more)")
    return build_loading(adapter.name, name, requirements, options, dists, python=found[0])


def _with_valid_bytecode(found, name):
    """`found`, its bytecode compiled again first where it was built before bytecode.py
    existed and links files (its linked sources' bytecode is stale), under its build lock."""
    if not _stale_bytecode(found.manifest):
        return found
    with _build_lock(found.path):
        return _bytecode_refreshed(found, name)


def _stale_bytecode(manifest):
    return manifest.get("bytecode") != bytecode.RULE and manifest.get("shared_files") and not manifest.get("layer_of")


def _bytecode_refreshed(found, name):
    """`found` with its linked sources' bytecode compiled again, where built before
    bytecode.py; the caller holds its build lock."""
    if not _stale_bytecode(found.manifest):
        return found
    _step(bytecode.command(found.python, found.path), os.path.join(found.path, "install.log"),
          f"compiling the bytecode of {name}'s linked sources again")
    manifest = dict(found.manifest, bytecode=bytecode.RULE)
    from harness.results import write_json_atomic

    write_json_atomic(os.path.join(found.path, MANIFEST), manifest)
    return Env(found.path, manifest)


def _admits(requires_python, version):
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(requires_python).contains(version)
    except InvalidSpecifier:
        return True  # unreadable: let pip decide


def build_loading(adapter_name, name, requirements, options, dists, python=None):
    """`build`, then the adapter must load there; when it does not with the pinned
    NumPy/SciPy, built again with each of era.LADDER's older ones until it does (the
    manifest's `dependency_differs` and `era_reason` say what and why)."""
    from harness import frameworks
    from harness.versions import era

    def loads(python, log):
        era.check_loads(adapter_name, python)

    try:
        return build(name, requirements, pip_options=options, dists=dists, extra_steps=(loads,), python=python)
    except Unavailable as first:  # it does not load (era.LoadFailed), or pip cannot install it
        failure = first  # with the pinned NumPy (TensorFlow 2.17 requires numpy<2)
    # only a failure whose last lines name NumPy/SciPy: an adapter API the release lacks,
    # or a Python it does not support, no NumPy would help
    if not era.about_numpy(str(failure).split("last lines:")[-1]):
        raise failure
    era_requires = frameworks.get(adapter_name).era_requires
    for step in era.LADDER:
        adds = tuple(era_requires.get(step[0], ()))
        tried = era.relaxed(requirements, step, adds)
        try:
            env_ = build(name, tried, pip_options=options, dists=dists + adds, extra_steps=(loads,),
                         annotate=lambda m, step=step: _era_note(m, requirements, step, failure), python=python)
        except Unavailable:
            continue
        return env_
    raise failure


def runtime_pins(exclude=(), also=()):
    """gradmem's own runtime requirements, and `also` (an adapter's), pinned to the
    versions installed here."""
    pins = []
    try:
        requires = importlib.metadata.requires("gradmem") or []
    except importlib.metadata.PackageNotFoundError:
        requires = ["numpy"]
    requires = list(requires) + list(also)  # a distribution named twice is pinned once (below)
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        dist = re.split(r"[<>=!~;\[ (]", requirement, maxsplit=1)[0].strip()
        if not dist or dist in exclude:
            continue
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(dist)
    return list(dict.fromkeys(pins))


def _era_note(manifest, pinned, step, failure):
    from harness.versions import era

    manifest["dependency_differs"] = era.differs(pinned, manifest.get("versions", {}))
    manifest["era_step"] = step[0]
    manifest["era_reason"] = str(failure).splitlines()[-1][:300]
    return manifest


def build(name, requirements, pip_options=(), dists=(), extra_steps=(), annotate=None, python=None):
    """Build (or find, under the lock) the environment `name` with `requirements`, in a
    venv of `python` (default: the running interpreter).

    `extra_steps`: functions (python, log_path) -> None run after the install (e.g. a
    commit's own package); they raise Unavailable to fail the build."""
    interpreter = python or sys.executable
    tag = None
    if python is not None:  # named for its Python: never under the running one's name
        version = interpreters.version_of(python)
        if version is None:
            raise Unavailable(f"{python} does not run (asked for its version): no environment of {name} with it")
        tag = python_tag(".".join(map(str, version)))

    def fill(scratch, log):
        python = os.path.join(scratch, "bin", "python")
        _step([interpreter, "-m", "venv", scratch], log, "python -m venv")
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        _step(pip + list(pip_options) + list(requirements), log, f"pip install {' '.join(requirements)}")
        # workers run this checkout's code (code_link.py), whose modules import on 3.10 too;
        # the installed copy only names gradmem's version, so its own Requires-Python
        # (>=3.11) must not refuse an environment of an older Python (torch 1.12.1 has
        # wheels for Python <= 3.10 only)
        _step(pip + ["--no-deps", "--ignore-requires-python", gradmem_wheel(log)], log, "pip install --no-deps gradmem")
        for extra in extra_steps:
            extra(python, log)
        manifest = {
            "name": name,
            "requirements": list(requirements),
            "pip_options": list(pip_options),
            "python": _run_python(python, "import sys; print(sys.version.split()[0])").strip(),
            "versions": installed_versions(python, tuple(dists) + ("numpy", "gradmem")),
        }
        # the framework's other environments (its other releases, its commit bases) hold
        # most of these files already: linked to theirs, not stored again
        family = shared_files.siblings(cache_root(), name.split("-")[0] + "-", MANIFEST, env_path(name, tag))
        manifest["shared_files"], manifest["shared_bytes"] = shared_files.share(scratch, family)
        # a linked source carries its sibling's time: the bytecode pip wrote for it is
        # stale until compiled again (bytecode.py)
        _step(bytecode.command(python, scratch), log, "compiling the bytecode of linked sources")
        manifest["bytecode"] = bytecode.RULE
        return annotate(manifest) if annotate else manifest

    return _made_once(name, fill, tag=tag)


def layer(name, base, install_into, dists):
    """An environment `name` made of `base`'s interpreter and a directory of its own
    (``site``, first on PYTHONPATH) that `install_into(python, site, log)` fills (``pip
    install --target``): one commit's install on top of shared requirements. A cached
    layer made on another base (one since renamed for what it holds) is made again: its
    install ran against that base's packages, and its interpreter is that base's."""

    def fill(scratch, log):
        site = os.path.join(scratch, "site")
        install_into(base.python, site, log)
        versions = {**base.versions, **installed_versions(base.python, tuple(dists), site)}
        return dict(base.manifest, name=name, layer_of=base.path, python_path=base.python, versions=versions)

    return _made_once(name, fill, reuse=lambda found: found.manifest.get("layer_of") == base.path)


@contextlib.contextmanager
def _build_lock(path):
    """The exclusive lock on ``PATH.lock`` that building, refreshing or removing the
    environment at `path` is done under."""
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _made_once(name, fill, reuse=None, tag=None):
    """The cached environment `name` (when `reuse(found)` says it may serve: None, any),
    or the one `fill(scratch, log) -> manifest` makes in a scratch directory, renamed into
    place only when complete; under a lock, so two processes build it once. A failure or
    a stop signal removes the scratch directory."""
    path = env_path(name, tag)
    os.makedirs(cache_root(), exist_ok=True)
    with _build_lock(path):
        found = cached(name)
        if found is not None and found.path == path and (reuse is None or reuse(found)):
            return _bytecode_refreshed(found, name)
        scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.partial-", dir=cache_root())
        try:
            manifest = fill(scratch, os.path.join(scratch, "install.log"))
            with open(os.path.join(scratch, MANIFEST), "w", encoding="utf-8") as handle:
                json.dump(manifest, handle, indent=1)
            _discard(path)  # a damaged one without a manifest, or one `reuse` refused
            os.rename(scratch, path)
            scratch = None
            _built.add(os.path.abspath(path))
            return Env(path, manifest)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def built_here(path):
    """Whether this process built the environment at `path` (not found it cached)."""
    return os.path.abspath(path) in _built


def remove(path):
    """Delete a built environment unless another process uses it; True when it is gone.

    Never under another process's workers: one that took it into use (`for_version`)
    holds a shared lock on NAME.use, and then the environment stays (False) for that
    process's own prune, or the next. This process's own hold is let go first.

    No reader ever finds it half-deleted: it is renamed out of its place first (one
    atomic step, under its build lock), then removed. A removal cut short (a restart
    mid-rmtree) once left a manifest over an environment without NumPy's or TensorFlow's
    files, and the next sweep took it as built: every cell an ImportError."""
    path = os.fspath(path)  # a pathlib.Path from a caller's `Path.home() / ...` too
    name = re.sub(r"-py\d+\.\d+$", "", os.path.basename(path))
    mine = _in_use.pop(name, None)
    if mine is not None:
        mine.close()
    os.makedirs(cache_root(), exist_ok=True)
    with _build_lock(path), open(_use_lock(os.path.dirname(path), name), "a") as use:
        try:
            fcntl.flock(use, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        _discard(path)
    return True


def _discard(path):
    """Rename `path` (if there) out of its place, then delete it: a deletion cut short
    leaves only a stray ``.NAME.removing-*`` directory, never a partial `path`. Callers
    hold its build lock."""
    trash = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.removing-", dir=os.path.dirname(path))
    try:
        os.rename(path, os.path.join(trash, "env"))
    except FileNotFoundError:
        pass
    shutil.rmtree(trash, ignore_errors=True)


def _step(command, log, what):
    code, last = install.run(command, log, timeout_s=PIP_TIMEOUT_S)
    if code != 0:
        raise Unavailable(f"{what} failed (exit {code}){_constraint_refusal(log)}; the installer's last lines:\n{last}"
                          + _python_refusal(log))


def _constraint_refusal(log):
    """Where pip refused the release for a constraint set outside gradmem (pip.conf's
    ``constraint``, PIP_CONSTRAINT: a machine may cap torch), the words saying so, for the
    first line of the reason (the one a sweep's console shows); else ''."""
    caps = sorted({line.split("(constraint)", 1)[1].strip() for line in _log_lines(log, "(constraint)")})
    if not caps:
        return ""
    return (f": a pip constraint set outside gradmem refuses it ({', '.join(caps)}; `pip config list` shows "
            "where: a machine's pip.conf or PIP_CONSTRAINT)")


def _python_refusal(log):
    """pip's list of the releases it refused for their Requires-Python, whole, when the
    log has one: the last lines cut a long line to its two ends, and PyTensor's list
    (3.1.1 ... 3.3.8) lost the release asked for in its middle, so no other Python was
    tried for it (interpreters.needs_other_python reads this line)."""
    lines = _log_lines(log, interpreters.PIP_PYTHON_MISMATCH)
    return f"\npip's Requires-Python refusals, whole:\n{lines[-1]}" if lines else ""


def _log_lines(log, marker):
    """The installer log's lines holding `marker`, stripped, whole (not cut as its last
    lines are); [] where the log cannot be read."""
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            return [line.strip() for line in handle if marker in line]
    except OSError:
        return []


def gradmem_wheel(log):
    """A wheel of the running gradmem, built once per process, or its installed
    distribution's name when it is not a source checkout."""
    if "wheel" not in _made:
        if not os.path.exists(os.path.join(PROJECT_ROOT, "pyproject.toml")):
            return "gradmem==" + importlib.metadata.version("gradmem")
        directory = tempfile.mkdtemp(prefix="gradmem-wheel-")
        atexit.register(shutil.rmtree, directory, True)
        _made["wheel"] = build_gradmem_wheel(directory, log)
    return _made["wheel"]


def build_gradmem_wheel(directory, log):
    """Build a wheel of this checkout into `directory` (offline: this environment's
    own setuptools, no build isolation; else pip fetches the build backend); its path."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", directory,
               PROJECT_ROOT]
    code, last = install.run(command, log)
    if code != 0:
        code, last = install.run([c for c in command if c != "--no-build-isolation"], log)
    if code != 0:
        raise Unavailable(f"could not build a wheel of gradmem from {PROJECT_ROOT}:\n{last}")
    return max(
        (os.path.join(directory, f) for f in os.listdir(directory) if f.startswith("gradmem-") and f.endswith(".whl")),
        key=os.path.getmtime,
    )


def installed_versions(python, dists, first=None):
    """{distribution: version} installed in the environment of `python` (with the
    directory `first` ahead of its site-packages)."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "found = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try: found[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "try:\n"  # torch wheels carry the commit they were built from
        "    text = m.distribution('torch').locate_file('torch/version.py').read_text()\n"
        "    found['torch.git_version'] = text.split(\"git_version = '\", 1)[1].split(\"'\")[0]\n"
        "except Exception: pass\n"
        "print(json.dumps(found))\n"
    )
    env = dict(os.environ, PYTHONPATH=first) if first else None
    return json.loads(_run_python(python, script, *sorted(set(dists)), env=env))


def _run_python(python, script, *args, env=None):
    import subprocess

    done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, check=True, timeout=120, env=env)
    return done.stdout
