"""What the standalone runs found, kept beside the release store (--out, default releases/):

    DIR/FRAMEWORK.upstream.jsonl     every run of a standalone script: its group, release,
                                     index, the script's hash, and the JSON line it printed
                                     (or why it failed); appended as each run ends, so a
                                     stopped batch goes on where it stopped
    DIR/FRAMEWORK.upstream.json      per change (its id): the verdict (reproduced
                                     standalone, harness only, failed, unavailable), both
                                     sides' standalone samples and the harness's move
    DIR/upstream/FRAMEWORK/ID.py     the standalone script of a group (one per workload,
                                     mode and release pair: it measures every figure)
    DIR/upstream/FRAMEWORK/ID.md     the report draft of that group's changes
    DIR/upstream/FRAMEWORK/ID.functions.py, ID.table.py
                                     the script in the loss's other forms, where a
                                     harness-only move was run so (FORM_SUFFIX)

The page (releases/page.py), docs/releases.md (tools/release_tallies.py) and the site
read the outcomes through `read_outcomes` and `label`.
"""

import hashlib
import json
import os

from harness import results

#: outcome status -> the words a change's line says
LABELS = {
    "reproduced": "reproduced standalone",
    "harness only": "harness only",
    "not reproduced here": "not reproduced here, by gradmem either",
    "failed": "standalone script failed",
    "unavailable": "not run standalone: an environment could not be built",
}


#: the file of a group's script in each form (harness/upstream/inline.py, FORMS)
FORM_SUFFIX = {"inlined": ".py", "functions": ".functions.py", "table": ".table.py"}


def samples_path(out, framework):
    return os.path.join(out, f"{framework}.upstream.jsonl")


def outcomes_path(out, framework):
    return os.path.join(out, f"{framework}.upstream.json")


def artifacts_dir(out, framework):
    return os.path.join(out, "upstream", framework)


def script_hash(text):
    """The hash of a script's code: its docstring left out (it quotes the store's figures,
    which a later confirmation may refine without changing what the script measures)."""
    if text.startswith('"""'):
        text = text[text.index('"""', 3) + 3:]
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_records(path, check=True):
    """The lines of a JSONL file ([] when absent), a damaged line named on stderr and
    skipped; `check`: each must be a gradmem record (results.validate)."""
    try:
        found, damaged = results.scan_records(path, check=check)
    except results.RecordFileError:
        return []
    results.warn_damaged(damaged)
    return found


def read_samples(out, framework):
    """Every run held ([] when none)."""
    return read_records(samples_path(out, framework), check=False)


def append_sample(out, framework, sample):
    results.append_record(samples_path(out, framework), sample)


def read_outcomes(out, framework):
    """{"changes": {id: outcome}, "groups": {group id: ...}} ({} parts when absent)."""
    path = outcomes_path(out, framework)
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        found = {}
    found.setdefault("changes", {})
    found.setdefault("groups", {})
    return found


def write_outcomes(out, framework, outcomes):
    results.write_json_atomic(outcomes_path(out, framework), outcomes)


#: a harness-only change the script reproduces in another of the loss's forms (report_change.judge_forms)
LOSS_FORM = {"functions": "harness only: the loss's form (reproduced with each op a small function)",
             "table": "harness only: the loss's form (reproduced as written, through an op table)"}


def loss_form(outcome):
    """The form (harness/upstream/inline.py, FORMS) in which the script reproduces a
    harness-only `outcome`'s move, or None: where one does, the loss's form makes it."""
    if (outcome or {}).get("status") != "harness only":
        return None
    return next((form for form, held in (outcome.get("forms") or {}).items() if held.get("status") == "reproduced"),
                None)


def forms_judged(outcome, forms, sha_of=None):
    """True when a harness-only `outcome` needs no more of the loss's `forms` run: one
    reproduces its move, or each has its verdict. `sha_of(form)`: the hash of the form's
    script as it would be written now; a verdict of a script written otherwise (the form
    changed since: report-change's op table, 2026-12-05) does not count."""
    held = {form: judged for form, judged in ((outcome or {}).get("forms") or {}).items()
            if sha_of is None or judged.get("script_sha") == sha_of(form)}
    return any(judged.get("status") == "reproduced" for judged in held.values()) or all(form in held for form in forms)


def label(outcome):
    """The words of a change's line: "reproduced standalone", "harness only", ... ("" when
    the change was not run standalone)."""
    form = loss_form(outcome)
    return LOSS_FORM[form] if form else LABELS.get((outcome or {}).get("status"), "")


def standing(change):
    """'' for a change a user would act on; else what a draft written while it was one says
    now that the store has judged it again: 'withdrawn: not confirmed: ...' (side by side,
    the move did not hold), 'not actionable: ...' (pending, or under the size rule), or
    'withdrawn: no longer flagged' (`change` None: the sweep no longer shows it)."""
    from harness.releases import confirm

    if change is None:
        return "withdrawn: no longer flagged by the release sweep"
    note = confirm.why_not_actionable(change)
    if note is None:
        return ""
    kind = "withdrawn" if (change.get("confirmation") or {}).get("status") == "not confirmed" else "not actionable"
    return f"{kind}: {note}"


def tally(document, outcomes):
    """{"actionable", "run", a count per status of LABELS, and "loss form" (of the harness
    only, those the loss's form makes: `loss_form`)} over the actionable changes of
    `document` (a changes.json)."""
    from harness.upstream import ids

    framework = document.get("framework", "")
    counts = {"actionable": 0, "run": 0, **{status: 0 for status in LABELS}, "loss form": 0}
    for change in document.get("changes") or []:
        if not change.get("actionable"):
            continue
        counts["actionable"] += 1
        found = outcomes.get("changes", {}).get(ids.of(framework, change))
        if found and found.get("status") in LABELS:
            counts["run"] += 1
            counts[found["status"]] += 1
            counts["loss form"] += loss_form(found) is not None
    return counts
