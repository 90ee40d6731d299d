"""A pytest marker for a training step's memory: ``@pytest.mark.step_memory(...)``.

Registered through pytest's entry point (``pytest11`` in pyproject.toml), so a project
that installs gradmem can guard its own model's step in its own tests::

    @pytest.mark.step_memory(workload="tests/my_model.py", framework="torch",
                             limit="64 MiB")                 # step peak, absolute
    @pytest.mark.step_memory(workload="my_model.py", framework="jax",
                             limit="1.2x bound", retained="8 MiB")
    @pytest.mark.step_memory(workload="my_step.py", leak="0 B")  # fails when the step grows
    def test_my_model_step_fits():
        ...

The cell is measured the way a sweep measures it: `harness run`'s sweep of that one
cell (harness/sweep/api.py: a fresh worker forked from the framework's zygote, a
memory pass and a short time pass), so the figure is the record's, never a second
measurement path. Tests that gate the same cell (same step file, options and
environment) share one measurement within a pytest process.
`limit` bounds the step peak (the figure registry's ``step_peak``: above what was
resident at the step's start), ``retained`` what the framework keeps between steps
(its own memory: harness/figures.py), ``leak`` its growth per step (the leak phase of
the memory pass, harness/measure/leak.py): a step whose verdict is ``grows`` at more
than ``leak`` bytes a step fails, and so does one whose growth could not be judged
(``inconclusive``: too few steps in the phase's budget), saying so;
``"Nx bound"`` is N times the workload's bound (declared or derived). CUDA cells are
judged by the allocator's figures (harness/figures.py), not the process's RSS; an
upper bound over the limit fails, saying it is one. A crossed limit fails
the test with the measured figures and the breakdown; a cell that does not run
(unavailable framework, error, OOM) fails with its status and message.

Other keyword arguments: size (tiny), dtype (float32), device (cpu), mode (eager),
optimizer, remat. The test body runs after the check, as usual. A native step file
(harness/steps/: your own training step in plain framework code) runs in its own
framework's row, so ``framework`` may be left out; without a ``bound_bytes`` it has no
bound, and ``"Nx bound"`` is then an error.
"""

import io
import json
import os
import re
import tempfile
from contextlib import redirect_stderr

import pytest

from harness import figures as registry
from harness import units

MARKER = "step_memory"
CELL_OPTIONS = ("size", "dtype", "device", "mode", "optimizer", "remat")
GATES = ("limit", "retained", "leak")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(workload, framework='reference' (a native step: its own), limit=None, retained=None, leak=None, "
        "size='tiny', ...): measure the workload's training step in a fresh worker (gradmem) and fail when its step "
        "peak exceeds limit ('64 MiB', '1.2x bound'), what it retains exceeds retained, or it grows every step by "
        "more than leak ('0 B')",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker(MARKER)
    if marker is not None:
        check(**_arguments(marker))


def _arguments(marker):
    kwargs = dict(marker.kwargs)
    if marker.args:
        kwargs.setdefault("workload", marker.args[0])
    if "workload" not in kwargs:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} needs workload=... (a built-in name, a .py path or module:attr)")
    if all(kwargs.get(gate) is None for gate in GATES):
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: give one or more of {'=, '.join(GATES)}=")
    unknown = set(kwargs) - {"workload", "framework", *GATES, *CELL_OPTIONS}
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown argument(s) {', '.join(sorted(unknown))}")
    return kwargs


def parse_limit(text, bound):
    """'64 MiB', '512M', 1048576 -> bytes; '1.2x bound' -> 1.2 * bound."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    raw = str(text).strip().lower()
    relative = re.fullmatch(r"([0-9.]+)\s*x\s*bound", raw)
    if relative:
        if bound is None:
            raise pytest.UsageError(f"step_memory limit {text!r}: this workload has no bound (a native step without "
                                    "bound_bytes(cfg)): give bytes ('64 MiB')")
        return int(float(relative.group(1)) * bound)
    absolute = re.fullmatch(r"([0-9.]+)\s*([kmgt]?)(i?b)?", raw)
    if not absolute:
        raise pytest.UsageError(f"step_memory limit {text!r}: expected bytes ('64 MiB', '512M', 1048576) "
                                "or a multiple of the bound ('1.2x bound')")
    return int(float(absolute.group(1)) * units.SUFFIXES[absolute.group(2)])


# Records measured in this pytest process, by cell: tests that gate one step with
# different limits share its measurement. A changed step file or environment is another
# key, and so measured again.
_measured = {}


def measure(workload, framework=None, size="tiny", dtype="float32", device="cpu", mode="eager",
            optimizer=None, remat=None):
    """The record of one cell, measured by `harness run`'s sweep (a sweep of one), once
    per pytest process for the same cell, step file and environment."""
    framework = framework or default_framework(workload)
    key = (str(workload), framework, size, dtype, device, mode, optimizer, remat, _file_stamp(workload),
           tuple(sorted((k, v) for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST")))
    if key not in _measured:
        _measured[key] = _sweep_of_one(workload, framework, size, dtype, device, mode, optimizer, remat)
    return _measured[key]


def _file_stamp(workload):
    """A step file's size and modification time (None for a built-in or a module)."""
    path = str(workload).split("#")[0]
    return (os.stat(path).st_size, os.stat(path).st_mtime_ns) if os.path.isfile(path) else None


def _sweep_of_one(workload, framework, size, dtype, device, mode, optimizer, remat):
    from harness.choices import ChoiceError
    from harness.sweep import api as sweep, outcome
    from harness.sweep.cell_runner import Options

    cell = f"{framework} on {workload} ({size}, {dtype}, {device}, {mode})"
    with tempfile.TemporaryDirectory(prefix="gradmem-step-memory-") as tmp:
        out = os.path.join(tmp, "cell.jsonl")
        said = io.StringIO()
        try:
            todo = sweep.plan(str(workload), framework, size, dtype, device, mode, optimizer=optimizer,
                              remat=remat or "none")
            with redirect_stderr(said):  # the sweep's lines, shown only when it fails
                code = sweep.run(todo, Options(repeat=1, warmup=1, time_budget_s=0.5), out, sweep.How(quiet=True))
        except ChoiceError as err:
            pytest.fail(f"step_memory: {cell}: {err}", pytrace=False)
        # a cell that failed is still a record: its status and message are the answer
        if code not in outcome.RAN_TO_THE_END or not os.path.exists(out):
            pytest.fail(f"step_memory: the sweep of {cell} failed (exit {code}):\n{said.getvalue()[-3000:]}",
                        pytrace=False)
        with open(out, encoding="utf-8") as f:
            return json.loads(f.readlines()[-1])


def default_framework(workload):
    """A native step's own framework; the reference engine for any other workload."""
    from harness import workloads
    from harness.choices import ChoiceError

    try:
        step = workloads.native(workloads.resolve(str(workload)))
    except ChoiceError as err:  # a missing or ill-formed file: said once, by the marker
        pytest.fail(f"step_memory: {err}", pytrace=False)
    return step.FRAMEWORK if step is not None else "reference"


def check(workload, framework=None, limit=None, retained=None, leak=None, **cell):
    framework = framework or default_framework(workload)
    record = measure(workload, framework, **cell)
    if record["status"] != "ok":
        pytest.fail(f"step_memory: {framework} on {workload}: {record['status']}: {record.get('message', '')}",
                    pytrace=False)
    figures, source = _figures(record)
    crossed = []
    if limit is not None:
        allowed = parse_limit(limit, record["bound_bytes"])
        if figures["peak"] > allowed:
            crossed.append(f"step peak {_mib(figures['peak'])} > limit {limit} ({_mib(allowed)})")
    if retained is not None:
        allowed = parse_limit(retained, record["bound_bytes"])
        if figures["retained"] is None or figures["retained"] > allowed:
            crossed.append(f"retained {_mib(figures['retained'])} > limit {retained} ({_mib(allowed)})")
    if leak is not None:
        crossed += _leak_crossed(record, leak)
    if crossed:
        pytest.fail(report(record, figures, source, crossed), pytrace=False)


def _leak_crossed(record, leak):
    """Why the step's growth crosses `leak` (bytes a step), [] when it does not: a
    verdict of `grows` above it, or no verdict at all."""
    allowed = parse_limit(leak, None)
    verdict = registry.leak_verdict(record)
    found = registry.value(record, "leak")
    said = record.get("leak") or {}
    if verdict is None or verdict == "inconclusive":
        why = said.get("stopped") or "the memory pass took no leak reading"
        return [f"growth per step not judged ({verdict or 'not measured'}: {why}); leak limit {leak}"]
    if verdict == "grows" and found > allowed:
        return [f"grows {found / 1024:.1f} KiB a step over {said.get('readings')} steps (p = {said.get('p')}) > "
                f"leak limit {leak}"]
    return []


def _figures(record):
    """The figures the marker gates, from the figure registry: a CUDA cell's are its
    device allocator's (RSS does not see device memory)."""
    source = registry.source(record)
    if source.kind is None:
        pytest.fail(f"step_memory: {record['framework']} on {record['device']}: {source.reason}", pytrace=False)
    found = {"peak": registry.value(record, "step_peak"), "retained": registry.value(record, "retained"),
             "phases": registry.phases(record, "step_peak")}
    if source.kind == "host":
        return found, "process RSS (step peak above the step's start; retained between steps)"
    bound = " (an upper bound: " + registry.upper_bound_reason(record) + ")" \
        if registry.upper_bound(record, "step_peak") else ""
    return found, source.label + bound


def report(record, figures, source, crossed):
    lines = [f"step_memory: {record['framework']} {record['mode']} {record['device']} on "
             f"{record['workload']} at {record['size']} {record['dtype']}: " + "; ".join(crossed),
             f"  measured by {source}:",
             f"  step peak {_mib(figures['peak'])}, retained {_mib(figures['retained'])}, "
             f"bound {_mib(record['bound_bytes'])} ({record.get('bound_source') or 'declared'}), "
             f"peak/bound " + (f"{figures['peak'] / record['bound_bytes']:.2f}" if record['bound_bytes'] else "n/a"),
             "  per phase: " + ", ".join(f"{k} {_mib(v)}" for k, v in figures["phases"].items()),
             "  breakdown:"]
    for key, value in (record.get("breakdown_bytes") or {}).items():
        lines.append(f"    {key:<18} {_mib(value):>12}   {(record.get('breakdown_method') or {}).get(key, '')}")
    return "\n".join(lines)


def _mib(value):
    return "n/a" if value is None else f"{value / units.MIB:.3f} MiB"
