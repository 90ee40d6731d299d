"""The report draft of one change (Markdown): what a framework's maintainers need to act.

Title, the two releases, the figure and what it means, before and after (the
standalone script's runs, gradmem's side-by-side samples with p, the sweep's rounds),
the other figures that moved in the same step, where it lies (a commit stage 2 found,
else the two wheels' commits where the wheels name them), what `harness diff` says
moved (the retained page kind, the step peak by category, saved bytes by op, the
environment), the environment (Python, OS, the versions that differ) and the exact
commands to reproduce it, standalone and in gradmem.
"""

import functools
import os

from harness import figures, frameworks
from harness.diff import compare
from harness.releases import confirm, detect
from harness.report.fmt import signed_percent
from harness.upstream import ids, probe, store, verdict
from harness.units import MIB

#: how a mode's step is named in a title
STEP_NAMES = {("torch", "compiled"): "torch.compile", ("jax", "compiled"): "jax.jit",
              ("tensorflow", "compiled"): "tf.function", ("torch", "eager"): "eager autograd",
              ("jax", "eager"): "eager jax.vjp", ("tensorflow", "eager"): "eager GradientTape"}
TOP_OPS = 3
#: what a figure's amount is per (the growth per step is bytes a step)
PER_STEP = {detect.GROWTH: " a step"}


def mib(value):
    return "–" if value is None else f"{value / MIB:.2f} MiB"


def signed_mib(value):
    return "–" if value is None else f"{value / MIB:+.2f} MiB"


def amount(figure, value):
    """`value` of the figure named `figure` in its unit: MiB, or KiB a step for the growth
    per step (detect.fmt, as the release page writes it)."""
    return "–" if value is None else detect.fmt(figure, value) + PER_STEP.get(figure, "")


def signed_amount(figure, value):
    return "–" if value is None else ("+" if value >= 0 else "-") + amount(figure, abs(value))


def unit(figure):
    """The figure's unit as its samples are listed: 'MiB', 'KiB a step'."""
    return detect.unit(figure) + PER_STEP.get(figure, "")


def _samples(values, figure):
    """The numbers of `values` in the figure's unit (unit() names it once, above them)."""
    return ", ".join(detect.number(figure, v) for v in values)


#: what a draft whose change no longer stands says it is not
NOT_TO_FILE = "not a change to file"


def verdict_words(standing, status):
    """The header's verdict: the standalone `status` in bold, or, for a change that no
    longer stands (`standing`: store.standing), that first and the status after."""
    if not standing:
        return f"**{status}**"
    return f"**{standing.partition(': ')[0]}: {NOT_TO_FILE}** · standalone: {status}"


def title(framework, change):
    figure = figures.get(change["figure"])
    found = change.get("confirmation") or {}
    # the move side by side where it held; else the move the sweep flagged (a draft that
    # says it is withdrawn names the move it was written for)
    held = found if found.get("status") == "confirmed" else {"relative": change.get("relative")}
    delta = held.get("delta", change["delta"])
    step = STEP_NAMES.get((framework, change["mode"]), change["mode"])
    verb = "rises" if delta > 0 else "falls"
    rel = f" ({signed_percent(held['relative'])})" if held.get("relative") is not None else ""
    article = "an" if step[0] in "aeiou" else "a"
    return (f"{framework} {change['release']}: {figure.label} of {article} {step} training step {verb} by "
            f"{amount(figure.name, abs(delta))}{rel} from {change['before_release']} ({change['workload']}, CPU)")


def _median_record(records, figure):
    ok = [r for r in records if figures.value(r, figure) is not None]
    if not ok:
        return None
    return sorted(ok, key=lambda r: figures.value(r, figure))[(len(ok) - 1) // 2]


def diff_lines(change, confirm_records):
    """What `harness diff` says moved between the side-by-side samples of the two
    releases (the median sample of each by the change's figure)."""
    held = confirm.samples(confirm_records, confirm.group_key(change))
    a = _median_record([r for _, r in held.get(change["before_release"], [])], change["figure"])
    b = _median_record([r for _, r in held.get(change["release"], [])], change["figure"])
    if a is None or b is None:
        return ["- no side-by-side records of both releases to compare"]
    found = compare.build(a, b, ("A", "B"))
    lines = []
    moved = [r for r in found["figures"] if r["unit"] == "bytes" and compare.moved(r["a"], r["b"])]
    if moved:
        lines.append("- figures that moved (more than 2 % and 64 KiB): " + "; ".join(
            f"{r['figure']}{'' if r['phase'] in ('total', 'step') else ' (' + r['phase'] + ')'} "
            f"{mib(r['a'])} -> {mib(r['b'])}" for r in moved))
    kinds = [(kind, (b.get("retained_detail_bytes") or {}).get(kind, 0) - (a.get("retained_detail_bytes") or {}).get(kind, 0))
             for kind in ("anon", "file", "shmem")]
    lines.append("- retained by page kind (B - A): " + ", ".join(f"{k} {signed_mib(d)}" for k, d in kinds)
                 + " (anon + shmem are the framework's own; file pages are library code)")
    explained = found["explained"]
    parts = [f"{c['figure']} {signed_mib(c['diff'])}" for c in explained["categories"] if c["diff"] is not None]
    rest = explained["unexplained"]["diff"]
    if explained["step_peak"]["diff"] is not None:
        lines.append(f"- step peak {signed_mib(explained['step_peak']['diff'])} by category: "
                     + ", ".join(parts + [f"not explained by a counted category {signed_mib(rest)}"]))
    ops = [r for r in found["saved_by_op"]["rows"] if r["diff"]][:TOP_OPS]
    if ops:
        lines.append("- saved activations by op (biggest difference first): " + "; ".join(
            f"{r['op']} {signed_mib(r['diff'])} (x{r['count_a']} -> x{r['count_b']})" for r in ops))
    elif not found["saved_by_op"]["a"]["has_ops"]:
        lines.append("- saved activations by op: not listed for this cell (the framework gives no API that names "
                     "the op behind a saved buffer in this mode; docs/measurement.md)")
    env = [r for r in found["environment"] if r["key"].startswith("versions.")]
    if env:
        lines.append("- versions that differ: " + ", ".join(f"{r['key'][9:]} {r['a']} -> {r['b']}" for r in env))
    return lines


def _where(framework, change, env_info):
    search = change.get("commit_search")
    if search and search.get("kind") == "culprit":
        return [f"Bisected by gradmem's stage 2 to commit **{search['first_bad']}** (last good "
                f"{search.get('last_good', '?')}; {amount(change['figure'], search.get('good_figure'))} -> "
                f"{amount(change['figure'], search.get('bad_figure'))}).",
                "", f"```bash\n{search.get('command', '')}\n```"]
    lines = []
    commits = [(env_info.get(r) or {}).get("versions", {}).get(f"{framework}.git_version")
               for r in (change["before_release"], change["release"])]
    if all(commits):
        lines.append(f"Not bisected to a commit yet. The wheels name their commits: {change['before_release']} is "
                     f"`{commits[0][:12]}`, {change['release']} is `{commits[1][:12]}`; the move lies in "
                     f"`git log {commits[0][:12]}..{commits[1][:12]}`.")
    else:
        lines.append(f"Not bisected to a commit yet: it lies between the {change['before_release']} and "
                     f"{change['release']} releases.")
    if change.get("commit_command"):
        lines += ["", "gradmem's stage 2 (a source checkout of the framework):", "",
                  f"```bash\n{change['commit_command']}\n```"]
    return lines


def _environment(framework, change, confirm_records, runs):
    held = confirm.samples(confirm_records, confirm.group_key(change))
    records = [r for side in held.values() for _, r in side]
    provenance = (records[-1].get("provenance") or {}) if records else {}
    machine = provenance.get("machine") or {}
    lines = []
    if machine:
        lines.append(f"- gradmem's side-by-side runs: Python {provenance.get('python', '?')}, "
                     f"{machine.get('platform', '?')}, {machine.get('cpu_model', '?')}, {machine.get('cpus', '?')} CPUs, "
                     f"{machine.get('libc', '')}; {provenance.get('threads', '?')} threads")
    here = sorted({s.get("machine") for side in runs.values() for s in side.values() if s.get("machine")})
    if here:
        lines.append(f"- the standalone runs: {'; '.join(here)}")
    for release in (change["before_release"], change["release"]):
        mine = [s for s in runs.get(release, {}).values() if s.get("status") == "ok"]
        if mine:
            versions = ", ".join(f"{k} {v}" for k, v in sorted(mine[-1].get("versions", {}).items()))
            lines.append(f"- standalone under {release}: Python {mine[-1].get('python')}, {mine[-1].get('platform')}; "
                         f"{versions}; modules imported beyond the standard library: "
                         f"{', '.join(mine[-1].get('modules', [])) or 'none'}")
    deps = change.get("dependencies_differ") or {}
    lines.append("- dependency versions that differ between the two releases' environments: "
                 + (", ".join(f"{d} {a} -> {b}" for d, (a, b) in deps.items()) or "none (the same NumPy"
                    + (" and SciPy" if framework == "jax" else "") + ")"))
    return lines


#: how the draft's first sentence names a figure ({framework} is the framework's name)
PHRASES = {
    "retained": "the memory {framework} keeps between two training steps (**retained**, its own pages)",
    "step_peak": "the peak memory one steady training step needs (**step peak**)",
    "step_peak.forward": "the peak memory of one steady step's forward pass (**step peak, forward**)",
    "step_peak.backward": "the peak memory of one steady step's backward pass (**step peak, backward**)",
    "footprint": "the memory one steady training step needs with what {framework} keeps (**footprint** = retained + "
                 "step peak)",
    "first_step_peak": "the peak memory of the first, cold training step (**first-step peak**: tracing, compiling)",
    "first_step_footprint": "the first, cold training step's memory with what {framework} keeps (**first-step "
                            "footprint**)",
    detect.GROWTH: "the memory {framework} keeps gaining with every steady training step (**growth per step**: its "
                   "own pages, read at each step's start, over the second half of a run of steady steps)",
}


#: how the growth per step is measured, where the draft reports a change of it
GROWTH_HOW = (" For the growth per step the script runs {steps} steady steps instead of three (the longer run of "
              "gradmem's leak phase), reads the framework's own pages (RssAnon + RssShmem) at each one's start after "
              "`gc.collect()` + `malloc_trim(0)`, and reports the Theil-Sen slope (the median of the pairwise "
              "slopes, which one jump barely moves) of the second half: growth still going on at the end, where a "
              "cache that fills and stops is not counted.").format(steps=probe.GROWTH_STEPS)


def _phrase(figure, framework):
    return PHRASES.get(figure.name, f"the **{figure.label}** of one training step").format(framework=framework)


def _workload(change, group_size):
    """What the workload is (its docstring's first paragraph), what it stresses, its sizes."""
    from harness import workloads

    name = change["workload"]
    if workloads.native(name) is not None:
        return [f"A native step, the file as written: `{name}`."]
    module = workloads.get(name)
    doc = (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    lines = [f"`{name}`: {doc}"]
    if getattr(module, "STRESSES", ""):
        lines += ["", f"What it stresses: {module.STRESSES}. From: {getattr(module, 'SOURCE', '?')}."]
    lines += ["", f"Size {group_size}: `{workloads.config(name, group_size)}`, float32, seed 0 "
              f"(the script's `init` makes the same arrays)."]
    return lines


def render(framework, members, outcomes, runs, env_info, confirm_records, script_name, store_dir="releases",
           torch_index=None, growth=False):
    """The Markdown draft of a group: `members` its changes (the lead first), `outcomes`
    {id: standalone verdict}, `runs` {release: {index: sample}}; `growth`: the script
    measures the growth per step (the group's, report_change.Group.growth: a pending
    growth figure among the members does not make the script measure it)."""
    lead = members[0]
    found = lead.get("confirmation") or {}
    figure = figures.get(lead["figure"])

    def shown(value):  # an amount of the lead's figure, in its unit
        return amount(figure.name, value)

    def signed(value):
        return signed_amount(figure.name, value)

    adapter = frameworks.get(framework)
    before, after = lead["before_release"], lead["release"]
    lead_outcome = outcomes.get(ids.of(framework, lead)) or {}
    status = store.label(lead_outcome) or "not run standalone yet"
    standing = store.standing(lead)
    out = [f"# {title(framework, lead)}", "",
           f"`{ids.of(framework, lead)}` · gradmem draft for the {framework} issue tracker · "
           + verdict_words(standing, status), ""]
    if standing:
        kind, _, note = standing.partition(": ")
        out += [f"> **{kind.capitalize()}: {NOT_TO_FILE}.** gradmem's release sweep flagged {figure.label} "
                f"{shown(lead['before'])} -> {shown(lead['after'])} ({signed(lead['delta'])}); judged again by the "
                f"store, it is {note}. This draft and its standalone runs are kept as they were run, for the record.",
                ""]
    step = adapter.compiled_as if lead["mode"] == "compiled" else adapter.eager_as
    out += ["## What changed", "",
            f"From {framework} {before} to {after}, {_phrase(figure, framework)}, training the "
            f"`{lead['workload']}` workload ({lead['mode']}: {step}) on the CPU, float32, size {lead.get('size', 'small')}, "
            f"went from {shown(found.get('before'))} to {shown(found.get('after'))} "
            f"({signed(found.get('delta'))}"
            f"{', ' + signed_percent(found['relative']) if found.get('relative') is not None else ''}): "
            f"measured by gradmem with the two releases interleaved, and by the standalone script below with nothing "
            f"but {framework} and NumPy installed.", ""]
    out += ["| measured by | " + before + " | " + after + " | change |", "|---|---|---|---|"]
    if lead_outcome.get("before") is not None:
        share = f", {lead_outcome['share']:.0%} of gradmem's" if lead_outcome.get("share") is not None else ""
        out.append(f"| the standalone script ({len(lead_outcome['before_samples'])} + {len(lead_outcome['after_samples'])} "
                   f"runs, fresh processes, interleaved; p = {lead_outcome['p']:.3g}) | {shown(lead_outcome['before'])} | "
                   f"{shown(lead_outcome['after'])} | {signed(lead_outcome['delta'])}{share} |")
    forms = lead_outcome.get("forms") or {}  # the script in the loss's other forms, where it was run so
    form_names = {form: os.path.basename(held["script"]) for form, held in forms.items()}
    for form, held in forms.items():
        if held.get("before") is not None:
            out.append(f"| the script {verdict.FORM_WORDS[form]} ([{form_names[form]}]({form_names[form]}); "
                       f"{len(held['before_samples'])} + {len(held['after_samples'])} runs, p = {held['p']:.3g}) | "
                       f"{shown(held['before'])} | {shown(held['after'])} | {signed(held['delta'])}, "
                       f"{held['share']:.0%} of gradmem's |")
    control = lead_outcome.get("control") or {}
    if control.get("before") is not None:
        out.append(f"| gradmem's own memory pass, run again beside the script ({len(control['before_samples'])} + "
                   f"{len(control['after_samples'])}, p = {control['p']:.3g}) | {shown(control['before'])} | "
                   f"{shown(control['after'])} | {signed(control['delta'])} |")
    if "before" in found:
        out.append(f"| gradmem, side by side ({found['pairs']} pairs, p = {found['p']:.3g}) | {shown(found['before'])} | "
                   f"{shown(found['after'])} | {signed(found['delta'])} |")
    out.append(f"| gradmem's release sweep ({len(lead['before_samples'])} + {len(lead['after_samples'])} rounds) | "
               f"{shown(lead['before'])} | {shown(lead['after'])} | {signed(lead['delta'])} |")
    out += ["", f"Samples ({unit(figure.name)}):", ""]
    if lead_outcome.get("before_samples") is not None:
        out.append(f"- standalone: {before}: {_samples(lead_outcome['before_samples'], figure.name)}; "
                   f"{after}: {_samples(lead_outcome['after_samples'], figure.name)}")
    if found.get("before_samples"):
        again = found.get("measured_again")
        anew = f" (measured again {again['at'][:10]}; {confirm.withdrawn_words(again)})" if again else ""
        out.append(f"- side by side{anew}: {before}: {_samples(found['before_samples'], figure.name)}; {after}: "
                   f"{_samples(found['after_samples'], figure.name)}")
    for form, held in forms.items():
        if held.get("before") is not None:
            out.append(f"- standalone, {verdict.FORM_WORDS[form]}: {before}: "
                       f"{_samples(held['before_samples'], figure.name)}; {after}: "
                       f"{_samples(held['after_samples'], figure.name)}")
    if control.get("before_samples"):
        out.append(f"- gradmem's own pass beside the script: {before}: {_samples(control['before_samples'], figure.name)}; "
                   f"{after}: {_samples(control['after_samples'], figure.name)}")
    out.append(f"- sweep rounds: {before}: {_samples(lead['before_samples'], figure.name)}; "
               f"{after}: {_samples(lead['after_samples'], figure.name)}")
    if lead_outcome.get("why"):
        out += ["", f"Standalone verdict: {status}: {lead_outcome['why']}."]
    others = members[1:]
    if others:
        out += ["", "Other figures of the same step that moved (side by side; standalone verdict):", ""]
        for change in others:
            mine = change.get("confirmation") or {}
            outcome = outcomes.get(ids.of(framework, change)) or {}
            theirs = functools.partial(amount, change["figure"])
            standalone = (f"; standalone {theirs(outcome.get('before'))} -> {theirs(outcome.get('after'))}, "
                          f"{store.label(outcome)}" if outcome.get("before") is not None else
                          f"; {store.label(outcome) or 'not judged standalone'}")
            moved = (f"{theirs(mine.get('before'))} -> {theirs(mine.get('after'))}" if mine.get("before") is not None
                     else f"sweep {theirs(change.get('before'))} -> {theirs(change.get('after'))}")  # not side by side yet
            out.append(f"- `{ids.of(framework, change)}`: {moved} "
                       f"({mine.get('status', 'pending')}{', actionable' if change.get('actionable') else ''})"
                       + standalone)
    out += ["", "## The workload", "", *_workload(lead, group_size=lead.get("size", "small"))]
    out += ["", "## The figure", "", f"**{figure.label}** (`{figure.name}`): {figure.meaning}.", "",
            "How it is measured (gradmem's docs/measurement.md; the script's probe does the same): the process "
            "starts with `MALLOC_MMAP_THRESHOLD_=32768` (freed buffers of 32 KiB or more go back to the OS, so a peak "
            "cannot hide in heap memory kept from earlier) and 2 threads; the framework's one-time start-up (one tiny "
            "gradient in the same mode) runs before a baseline taken after `gc.collect()` and `malloc_trim(0)`; then the "
            "cold first step, one warm-up step and three steady steps, each after `gc.collect()` + `malloc_trim(0)`, "
            "the median step reported. A step peak is VmHWM after writing 5 to /proc/self/clear_refs at the phase's "
            "start, minus VmRSS at the step's start; retained is RssAnon + RssShmem at a steady step's start above the "
            "baseline's (library code pages, RssFile, are a figure of their own); footprint = retained + step peak."
            + GROWTH_HOW * growth]
    out += ["", "## Reproduce", "", f"The standalone script: [{script_name}]({script_name}) (the workload's step in "
            f"plain {framework}, its sizes, and the probe; imports only {framework}, NumPy and the standard library)."
            + "".join(f" The same step {verdict.FORM_WORDS[form]}: [{name}]({name})"
                      + (", the form that shows the move: run it in place of the first."
                         if store.loss_form(lead_outcome) == form else ".") for form, name in form_names.items()), ""]
    numpy_versions = {r: ((env_info.get(r) or {}).get("versions") or {}).get("numpy") for r in (before, after)}
    index = ""
    if framework == "torch":
        index = (" --index-url https://download.pytorch.org/whl/cpu" if torch_index not in (None, "pypi")
                 else "")
    commands = []
    for release in (before, after):
        versions = (env_info.get(release) or {}).get("versions") or {}
        # the framework's other distributions at the versions the store ran (jaxlib beside jax)
        extra = "".join(f" {d}=={versions[d]}" for d in adapter.distributions
                        if d in versions and d not in (adapter.package, framework))
        pin = extra + (f" numpy=={numpy_versions[release]}" if numpy_versions[release] else " numpy")
        venv = f"/tmp/{framework}-{release}"
        commands += [f"python3 -m venv {venv} && {venv}/bin/pip install{index} {adapter.package or framework}=={release}{pin}",
                     f"{venv}/bin/python {script_name}"] + [f"{venv}/bin/python {name}" for name in form_names.values()]
    out += ["```bash", *commands, "```", "", "In gradmem (the measurement this draft reports, and the side-by-side run):",
            "", "```bash", f"python -m harness report-change '{ids.of(framework, lead)}' --out {store_dir}"
            + (f" --torch-index {torch_index or 'pypi'}" if framework == "torch" else ""),
            f"python -m harness releases --framework {framework} --confirm --workload {lead['workload']} "
            f"--mode {lead['mode']} --from {before} --to {after} --out {store_dir}"
            + (f" --torch-index {torch_index or 'pypi'}" if framework == "torch" else "")]
    if lead.get("command"):
        out.append(lead["command"] + (f" --torch-index {torch_index or 'pypi'}" if framework == "torch" else ""))
    out += ["```", "", "## Where it lies", "", *_where(framework, lead, env_info), "",
            "## What `harness diff` says moved", "",
            f"Between the side-by-side samples of {before} and {after} (the median of each by {figure.label}):", "",
            *diff_lines(lead, confirm_records), "", "## Environment", "",
            *_environment(framework, lead, confirm_records, runs), "",
            f"Judged by: {verdict.RULE}. Side by side: {confirm.RULE}.", ""]
    return "\n".join(out)

