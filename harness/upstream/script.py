"""A standalone script for one change: the workload's step in plain framework code and the probe.

What a framework's maintainers can run with nothing but their framework and NumPy
installed (`python repro.py` under each release; it prints one JSON line of figures):

1. the environment a memory measurement needs, set before the interpreter starts
   (the script runs itself again with it): glibc's fixed mmap threshold, the thread
   counts, the adapter's own variables (programs.environment);
2. the probe (probe.py's source, standard library only);
3. the framework's imports and settings, and the step as its users write it in the
   cell's mode (programs.py);
4. the workload: its sizes, its ``init`` (NumPy, seeded as the sweep's) and its loss
   with the framework's ops inlined (inline.py) or, for a native step, the file as
   written;
5. `main`: the runtime warm-up (one tiny gradient in the same mode, before the
   baseline, as the worker's), the arrays, the measurement, the report.

`write(spec)` returns the script's source; a test runs it under .venv at tiny.
"""

import inspect
import os
from typing import NamedTuple

from harness import workloads
from harness.measure import runtime_warmup
from harness.upstream import emitters, inline, probe, programs

PROBE_MARK = "# ---- probe (copied into the scripts from here on) ----\n"
#: the growth per step's part of the probe, carried only by the scripts of a change of it
#: (every other script stays the text its runs were measured with: a run is held by its
#: script's hash, runner.py)
GROWTH_MARK = "# ---- growth (copied into the scripts of a growth-per-step change from here on) ----\n"


class Spec(NamedTuple):
    framework: str
    workload: str  # an op-set workload's name, or a native step file's path
    mode: str
    size: str
    dtype: str
    figure: str  # the figure the change is about (printed on stderr)
    title: str  # the docstring's first line
    about: str = ""  # a paragraph: the change, the releases, how it was found
    seed: int = 0
    growth: bool = False  # also measure the growth per step (`leak`) over probe.GROWTH_STEPS steady steps
    form: str = "inlined"  # the ops inlined, each a call of a small function, or through an op table (inline.FORMS)


def probe_source(growth=False):
    """probe.py from its marker on: the functions every script carries, and with
    `growth` those that measure the growth per step."""
    text = inspect.getsource(probe)
    common, growing = text[text.index(PROBE_MARK) + len(PROBE_MARK):].split(GROWTH_MARK)
    return common.rstrip() + "\n\n\n" + growing.lstrip() if growth else common.rstrip() + "\n"


def _header(spec, environment):
    doc = [spec.title, ""]
    if spec.about:
        doc += [spec.about, ""]
    doc += [
        f"Standalone: imports only {spec.framework}, NumPy and the standard library. Run it once under each",
        "release (a fresh environment with that release and NumPy installed):",
        "",
        f"    python {{this file}}",
        "",
        "It prints one JSON line: the figures in bytes (retained: the framework's own pages, RssAnon +",
        "RssShmem, at a steady step's start above a baseline taken before the first step; step_peak:",
        "VmHWM after writing 5 to /proc/self/clear_refs, minus VmRSS at the step's start; footprint:",
        "their sum; first_step_*: the same of the cold first step), every steady step's, the versions",
        "and the modules imported; and the figure of the change on stderr.",
        "",
        "Written by gradmem (python -m harness report-change): the workload is gradmem's op-set code with",
        *{"inlined": [f"{spec.framework}'s ops inlined; the measurement is gradmem's memory pass (docs/measurement.md)."],
          "functions": [f"each op a call of a small function of {spec.framework} code (op_add, op_matmul, ...), as "
                        "gradmem's", "op table calls them; the measurement is gradmem's memory pass "
                        "(docs/measurement.md)."],
          "table": [f"its ops called through an op table of {spec.framework} code as written (ops.add(x, y), OPS.add "
                    "a lambda),", "as gradmem runs it; the measurement is gradmem's memory pass "
                    "(docs/measurement.md)."]}[spec.form],
    ]
    lines = '"""' + "\n".join(doc).replace('"""', "'''") + '\n"""\n'
    env = "\n".join(f"    {k!r}: {v!r}," for k, v in environment.items())
    return lines + f'''
import os
import sys

# The environment of a memory measurement, set before the interpreter starts (glibc reads
# MALLOC_MMAP_THRESHOLD_ only then: buffers of 32 KiB or more are mmapped and go back to the
# OS when freed, so a peak cannot hide in heap memory kept from before): the script runs
# itself again with it.
ENVIRONMENT = {{
{env}
}}
if any(os.environ.get(k) != v for k, v in ENVIRONMENT.items()):
    os.execve(sys.executable, getattr(sys, "orig_argv", [sys.executable, *sys.argv]),
              {{**os.environ, **ENVIRONMENT}})
'''


def _section(title):
    return f"\n\n# ---- {title} " + "-" * max(4, 86 - len(title)) + "\n"


def write(spec):
    """The standalone script of `spec` (source text)."""
    if spec.framework not in emitters.FRAMEWORKS:
        raise inline.InlineError(f"no standalone scripts for {spec.framework}: written for "
                                 f"{', '.join(emitters.FRAMEWORKS)}")
    native = workloads.native(spec.workload) is not None
    if native and spec.form != "inlined":
        raise inline.InlineError(f"{spec.workload}: a native step is run as written; the {spec.form!r} form is of "
                                 "an op-set workload's loss")
    program, make_step = programs.program(spec.framework, "eager" if native else spec.mode)
    parts = [_header(spec, programs.environment(spec.framework))]
    parts.append(_section("the probe (gradmem's memory pass, docs/measurement.md)") + probe_source(spec.growth))
    prelude = programs.prelude(spec.framework, "eager" if native else spec.mode)
    parts.append(_section(f"{spec.framework}, as the sweep ran it") + prelude + "\nimport numpy as np\n"
                 + program.imports + "\n\n" + program.setup)
    if native:
        parts.append(_native(spec, program))
    else:
        parts.append(_op_set(spec, program, make_step))
    text = "".join(parts)
    aliases = [line for name, line in program.aliases.items() if f"{name}." in text]
    if aliases:  # an alias the inlined code reads (F.conv2d), after the framework's import
        text = text.replace(program.imports + "\n", program.imports + "\n" + "\n".join(aliases) + "\n", 1)
    return text.rstrip() + "\n"


def _op_set(spec, program, make_step):
    module = workloads.get(spec.workload)
    source, helpers, chain, imports = inline.inlined(module, spec.framework, spec.form)
    table = spec.form == "table"  # the code as written, its `ops` the op table (inline.TABLE)
    tiny, tiny_helpers, tiny_chain = inline.function(runtime_warmup.tiny_loss, spec.framework,
                                                     "tiny_loss_of" if table else "tiny_loss", spec.form)
    if table:
        tiny += f"\n\ndef tiny_loss(params, inputs):\n    return tiny_loss_of({inline.TABLE}, params, inputs)\n"
        imports = ["import types", *imports]
    cfg = workloads.config(spec.workload, spec.size)
    helper_text = inline.helper_sources(spec.framework, [*helpers, *tiny_helpers])
    if chain or tiny_chain:
        helper_text.insert(0, emitters.CHAIN)
    origin = getattr(module, "SOURCE", "")
    out = [_section(f"the workload: {spec.workload} ({origin})" if origin else f"the workload: {spec.workload}")]
    out.append("".join(f"{line}\n" for line in imports if line != "import numpy as np"))
    out.append(f"\nSIZE, DTYPE, SEED = {spec.size!r}, {spec.dtype!r}, {spec.seed}\nCFG = {cfg!r}\n"
               f"FIGURE = {spec.figure!r}  # the figure the change is about\n"
               f"DISTRIBUTIONS = {programs.distributions(spec.framework)!r}\n\n\n")
    out.append("\n\n".join(helper_text) + ("\n\n" if helper_text else ""))
    out.append(source)
    out.append(_section(f"the step, {spec.mode}") + make_step + "\n\n" + program.arrays)
    out.append(_section("the runtime warm-up: the framework's one-time start-up, before the baseline")
               + tiny + '''

def warm_up_runtime():
    """One gradient of two 4x4 tanh layers in the same mode: what the framework keeps for
    the life of the process once it has computed anything (XLA's compiler, Inductor's
    toolchain) is paid before the baseline, as imports are."""
    rng = np.random.default_rng(0)
    params = arrays({"w": rng.standard_normal((4, 4)).astype(DTYPE)})
    inputs = arrays({"x": rng.standard_normal((4, 4)).astype(DTYPE)})
    step = make_step(tiny_loss)
    if len(step) == 2:
        sync(step[1](step[0](params, inputs)))
    else:
        sync(step[0](params, inputs))
''')
    out.append(_section("main") + '''def main():
    warm_up_runtime()
    host = init(np.random.default_rng(SEED), CFG, DTYPE)
    params, inputs = arrays(host[0]), arrays(host[1])
    del host  # the framework's arrays are what the steps use
    step = make_step(lambda params, inputs: loss(''' + (f"{inline.TABLE}, " if table else "") + '''params, inputs, CFG))
''' + _measure_and_report(spec, "step, params, inputs, sync", "FIGURE, DISTRIBUTIONS"))
    return "".join(out)


def _native(spec, program):
    """A native step: the file as its author wrote it, then the probe around its step (one
    opaque phase, waited for by the file's sync(state), else the framework's own wait)."""
    path = workloads.native(spec.workload)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    framework_wait = "jax.block_until_ready" if spec.framework == "jax" else "lambda returned: returned"
    return (_section(f"the native step, as written: {os.path.basename(path)}") + text.rstrip() + "\n"
            + _section("main") + f'''def main():
    cfg = dict(SIZES[{spec.size!r}], device="cpu", dtype={spec.dtype!r})
    state = setup(cfg)
    own = globals().get("sync")  # the file's own sync(state), where it defines one
    wait = (lambda returned: own(state)) if own else ({framework_wait})
''' + _measure_and_report(spec, "(lambda state, _: (None, step(state)),), state, None, wait",
                                 f"{spec.figure!r}, {programs.distributions(spec.framework)!r}"))


def _measure_and_report(spec, measured, reported):
    """main's last lines: measure `measured` (measure()'s arguments), report with
    `reported` (the figure and the distributions); with spec.growth over
    probe.GROWTH_STEPS steady steps, their own memory's growth per step added as `leak`."""
    if not spec.growth:
        return f'''    figures, samples = measure({measured})
    report(figures, samples, {reported}, ENVIRONMENT)


if __name__ == "__main__":
    main()
'''
    return f'''    figures, samples = measure({measured}, steps=GROWTH_STEPS)
    # the memory figures of the first three steady steps; own memory at each one's settled start: its growth per step
    figures = with_growth(figures, samples)
    report_growth(figures, samples, {reported}, ENVIRONMENT)


if __name__ == "__main__":
    main()
'''
