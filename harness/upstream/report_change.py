"""One group of a store, end to end: its script, its runs, its verdicts, its draft.

A group is what one standalone measurement serves (ids.py): the figures of one
(workload, mode, release pair). `write_script` writes its script; `measure` runs it
under both releases (runner.py) and judges every confirmed figure of the group
(verdict.py), recording the outcomes (store.py); `write_draft` writes the Markdown
draft; `publish_page` writes the framework's release page again so its lines say
"reproduced standalone" or "harness only".
"""

import os

from harness import results, workloads
from harness.releases import confirm, detect
from harness.releases import page as release_page
from harness.releases import store as release_store
from harness.upstream import control, draft, ids, inline, runner, script, store, verdict
from harness.versions import envs as version_envs


#: the order in which a draft prefers to lead with a figure of its group
DRAFT_ORDER = ("retained", "step_peak", "step_peak.backward", "step_peak.forward", "first_step_peak", "footprint",
               "first_step_footprint", "first_step_peak.backward", "first_step_peak.forward", "code_pages")


def draft_lead(changes):
    """The change of `changes` a draft leads with: DRAFT_ORDER's first figure."""
    return min(changes, key=lambda c: DRAFT_ORDER.index(c["figure"]) if c["figure"] in DRAFT_ORDER
               else len(DRAFT_ORDER))


class Group:
    """A group of `framework`'s store in `out`: its changes, the lead first."""

    def __init__(self, out, framework, document, change, named=False):
        self.out, self.framework, self.document = out, framework, document
        self.members = ids.group_members(document, change)
        confirmed = [c for c in self.members if (c.get("confirmation") or {}).get("status") == "confirmed"
                     and c["figure"] in verdict.MEASURED]
        actionable = [c for c in confirmed if c.get("actionable")]
        # the figure the script prints on stderr (its code, and so its hash, depend on it)
        self.lead = (actionable or confirmed or [change])[0]
        # the draft's: the change a user named, else the actionable figure a maintainer reads
        # first (what is kept, then what a step needs; the sums after their parts)
        self.draft_lead = change if named else draft_lead(actionable or confirmed or [change])
        self.judged = confirmed or [change]  # the figures a run is judged for
        self.key = (change["workload"], change["mode"], change["before_release"], change["release"])
        self.id = ids.group_of(framework, self.key)
        self.size = document.get("size") or change.get("size") or "small"
        # a change of the growth per step: the script measures it (more steady steps), and
        # gradmem's own pass beside it gets the store's growth budgets
        self.growth = any(c["figure"] == detect.GROWTH for c in self.judged)

    @property
    def releases(self):
        return self.key[2], self.key[3]

    def path(self, suffix):
        return self.path_of(self.out, self.framework, self.id, suffix)

    @staticmethod
    def path_of(out, framework, group_id, suffix):
        return os.path.join(store.artifacts_dir(out, framework), ids.slug(group_id) + suffix)


def write_script(group, dtype="float32", form="inlined"):
    """The group's standalone script (in `form`), written beside the store; its path."""
    path = group.path(store.FORM_SUFFIX[form])
    results.write_text_atomic(path, script_source(group, dtype, form))
    return path


def script_source(group, dtype="float32", form="inlined"):
    """The group's standalone script (its source), its ops inlined or in `form`."""
    lead = group.lead
    found = lead.get("confirmation") or {}
    about = (f"gradmem found {lead['figure']} of {lead['workload']} ({lead['mode']}) move from "
             f"{draft.amount(lead['figure'], found.get('before', lead['before']))} at {lead['before_release']} to "
             f"{draft.amount(lead['figure'], found.get('after', lead['after']))} at {lead['release']} "
             f"(id {ids.of(group.framework, lead)}).")
    spec = script.Spec(group.framework, lead["workload"], lead["mode"], group.size, dtype, lead["figure"],
                       draft.title(group.framework, lead), about, growth=group.growth, form=form)
    return script.write(spec)


def measure(group, script_path, runs=runner.RUNS, torch_index=None, timeout_s=runner.TIMEOUT_S, with_control=True,
            with_forms=True, say=print):
    """Run the script under both releases and record each judged figure's outcome;
    where a figure did not reproduce, gradmem's own pass of the same cells beside it
    (`with_control`: control.py) says whether the harness still shows the move here,
    and (`with_forms`) the script in the loss's other forms says whether the loss's form
    is the cause (`judge_forms`). Returns {id: outcome}."""
    by_release, unavailable = runner.run_group(group.out, group.framework, group.id, group.releases, script_path,
                                               runs=runs, torch_index=torch_index, timeout_s=timeout_s, say=say)
    harness_today = None
    if not unavailable and with_control and any(
            verdict.judge(change, by_release)["status"] == "harness only" for change in group.judged):
        workload, mode = group.key[:2]
        harness_today = control.run_group(group.out, group.framework, group.id, workload, mode, group.size,
                                          group.releases, runs, torch_index=torch_index, timeout_s=timeout_s,
                                          growth=group.growth, say=say)
    outcomes = store.read_outcomes(group.out, group.framework)
    found = {}
    with open(script_path, encoding="utf-8") as handle:
        sha = store.script_hash(handle.read())
    for change in group.judged:
        if unavailable:
            outcome = {"status": "unavailable", "why": unavailable, "figure": change["figure"]}
        else:
            outcome = verdict.judge(change, by_release, harness_today)
        outcome.update(measured_on=runner.machine(), confirmed_on=confirmed_on(group))
        if outcome["status"] == "not reproduced here" and outcome["confirmed_on"] != [outcome["measured_on"]]:
            outcome["why"] += (f"; confirmed on {', '.join(outcome['confirmed_on']) or 'another machine'}, "
                               f"run here on {outcome['measured_on']}")
        outcome.update(group=group.id, script=os.path.relpath(script_path, group.out), script_sha=sha,
                       draft=os.path.relpath(group.path(".md"), group.out), actionable=bool(change.get("actionable")))
        found[ids.of(group.framework, change)] = outcome
    if with_forms and not unavailable:
        judge_forms(group, found, runs, torch_index, timeout_s, say)
    outcomes["framework"] = group.framework
    outcomes["rule"] = verdict.RULE
    outcomes["changes"].update(found)
    outcomes["groups"][group.id] = {"releases": list(group.releases), "runs": runs, "script": found and
                                    next(iter(found.values()))["script"]}
    store.write_outcomes(group.out, group.framework, outcomes)
    return found


def forms_due(change):
    """True when a harness-only verdict on `change` is judged in the loss's other forms
    too: an op-set workload's loss (a native step is run as written, in one form)."""
    return workloads.native(change["workload"]) is None


def judge_forms(group, found, runs, torch_index, timeout_s, say=print):
    """The harness-only figures of `found` ({id: outcome}, updated) judged by the group's
    script in the loss's other forms (inline.FORMS), in turn, until one reproduces the
    move: each op a small function (GROUP.functions.py), then the code as written through
    an op table, as gradmem calls it (GROUP.table.py); each run under both releases as the
    inlined one was. A move a form shows and the inlined script does not is made by how
    the loss is written (torch.compile traces a loss through small functions otherwise
    than the same loss inlined), not by what the harness measures."""
    judged = {ids.of(group.framework, c): c for c in group.judged}
    left = [i for i, o in found.items() if o["status"] == "harness only" and forms_due(judged[i])]
    for form in inline.FORMS[1:]:
        left = [i for i in left if not store.loss_form(found[i])]
        if not left:
            return
        path = write_script(group, form=form)
        say(f"  the loss {verdict.FORM_WORDS[form]}: {path}", flush=True)
        by_release, unavailable = runner.run_group(group.out, group.framework, group.id, group.releases, path,
                                                   runs=runs, torch_index=torch_index, timeout_s=timeout_s, say=say)
        with open(path, encoding="utf-8") as handle:
            sha = store.script_hash(handle.read())
        for change_id in left:
            held = ({"status": "unavailable", "why": unavailable} if unavailable
                    else verdict.judge_form(judged[change_id], by_release))
            held.update(script=os.path.relpath(path, group.out), script_sha=sha)
            found[change_id].setdefault("forms", {})[form] = held
            found[change_id]["why"] += "; " + verdict.form_words(judged[change_id]["figure"], form, held)
    for change_id in left:
        if all(held.get("status") == "not reproduced" for held in found[change_id]["forms"].values()):
            found[change_id]["why"] += ": not the loss's form"


def confirmed_on(group):
    """The machines the group's side-by-side samples were measured on, as runner.machine
    names this one."""
    held = confirm.samples(store.read_records(release_store.confirm_path(group.out, group.framework)), group.key)
    found = set()
    for side in held.values():
        for _, record in side:
            machine = (record.get("provenance") or {}).get("machine") or {}
            if machine:
                found.add(f"{machine.get('cpu_model') or '?'}, {machine.get('cpus')} CPUs ({machine.get('platform')})")
    return sorted(found)


def runs_of(group, script_path):
    """{release: {index: sample}} held for the group's current script."""
    with open(script_path, encoding="utf-8") as handle:
        sha = store.script_hash(handle.read())
    return runner.held(store.read_samples(group.out, group.framework), group.id, sha)


def _as_named(out):
    """The store directory as the draft's commands name it: `releases` for a gradmem
    checkout's own store (run from the checkout's root, as the README's commands are),
    wherever this process ran from; any other directory as given."""
    path = os.path.abspath(out)
    parent = os.path.dirname(path)
    if os.path.basename(path) == "releases" and os.path.isdir(os.path.join(parent, "harness", "upstream")):
        return "releases"
    return out


def write_draft(group, script_path, torch_index=None):
    outcomes = store.read_outcomes(group.out, group.framework)["changes"]
    lead = group.draft_lead
    text = draft.render(group.framework, [lead] + [c for c in group.members if c is not lead], outcomes,
                        runs_of(group, script_path), release_store.read_envs(group.out, group.framework),
                        store.read_records(release_store.confirm_path(group.out, group.framework)),
                        os.path.basename(script_path), store_dir=_as_named(group.out), torch_index=torch_index,
                        growth=group.growth)
    path = group.path(".md")
    results.write_text_atomic(path, text)
    return path


def mark_withdrawn(out, draft_path, words):
    """A draft written before, whose change the sweep no longer flags (nothing to write it
    from again), marked as it stands: its header says `words` (store.standing), a line
    under it says the draft is kept for the record; its commands name the store as a
    draft written now does (`_as_named`). Nothing when it is marked already."""
    with open(draft_path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    if len(lines) < 3 or draft.NOT_TO_FILE in lines[2]:
        return False
    kind, _, note = words.partition(": ")
    head, _, status = lines[2].rpartition(" · ")
    lines[2] = f"{head} · {draft.verdict_words(words, status.strip('*'))}"
    lines[3:3] = ["", f"> **{kind.capitalize()}: {draft.NOT_TO_FILE}.** {note[0].upper() + note[1:]}, measured "
                      f"again: this draft is kept as it was written and run, for the record."]
    text = "\n".join(lines).replace(f"--out {os.path.abspath(out)}", f"--out {_as_named(out)}")
    results.write_text_atomic(draft_path, text)
    return True


def publish_page(out, framework, document):
    """FRAMEWORK.html written again from the store (its changes as held, the standalone
    outcomes beside their lines)."""
    records = store.read_records(release_store.merged_path(out, framework))
    if not records:
        return None
    path = os.path.join(out, f"{framework}.html")
    results.write_text_atomic(path, release_page.render(
        framework, records, document, release_store.read_envs(out, framework), release_store.read_meta(out, framework),
        upstream=store.read_outcomes(out, framework)))
    return path


def cached(framework, release):
    """True when the release's environment is built already (no download to run it)."""
    return version_envs.cached(f"{framework}-{release}") is not None
