"""A change's stable id, and the change a user names by its id or by its line.

    torch:rnn_fanout:compiled:retained:2.3.1->2.4.0

framework:workload:mode:figure:before->after, the same on the release page, in
docs/releases.md and on the command line: it names one flagged figure of one store
(FRAMEWORK.changes.json) and never changes when the store is judged again. A line as
the page and the docs show it (``**torch** rnn_fanout compiled retained: 2.3.1 ->
2.4.0: side by side ...``) names the same change: its framework, series and release
pair are read from its start.

A *group* is what one standalone measurement serves: the figures of one (workload,
mode, release pair), measured together by one script (confirm.group_key).
"""

import re

from harness.choices import ChoiceError
from harness.releases import confirm

SEPARATOR = ":"
#: the start of a line as confirm.line writes it, after the docs' "- **framework** "
_LINE = re.compile(r"^\s*(?:-\s*)?\*{0,2}(?P<framework>[\w.-]+)\*{0,2}\s*(?:\([^)]*\)\s*)?"
                   r"(?P<workload>\S+)\s+(?P<mode>\S+)\s+(?P<figure>[\w.]+):\s*"
                   r"(?P<before>[^\s:]+)\s*->\s*(?P<after>[^\s:]+?):?(?:\s|$)")


def of(framework, change):
    """The id of a changes.json entry."""
    return SEPARATOR.join((framework, change["workload"], change["mode"], change["figure"],
                           f"{change['before_release']}->{change['release']}"))


def group_of(framework, key):
    """The id of a group (workload, mode, before, after): its figures' ids without the figure."""
    workload, mode, before, after = key
    return SEPARATOR.join((framework, workload, mode, f"{before}->{after}"))


def slug(text):
    """A file name for an id: every character but letters, digits, '.', '_' and '-' as '-'."""
    return re.sub(r"[^\w.-]+", "-", text.replace("->", "-to-")).strip("-")


def parse(text):
    """(framework, workload, mode, figure, before, after) of an id or a line; ChoiceError
    saying what an id looks like when `text` is neither."""
    parts = text.strip().split(SEPARATOR)
    if len(parts) == 5 and "->" in parts[4]:
        before, _, after = parts[4].partition("->")
        if all(parts[:4]) and before and after:
            return (*parts[:4], before, after)
    found = _LINE.match(text)
    if found:
        return tuple(found.group(k) for k in ("framework", "workload", "mode", "figure", "before", "after"))
    raise ChoiceError(f"{text!r} is not a change's id or line: an id is FRAMEWORK:WORKLOAD:MODE:FIGURE:BEFORE->AFTER "
                      f"(e.g. torch:rnn_fanout:compiled:retained:2.3.1->2.4.0), as the release page and "
                      f"docs/releases.md show beside each change")


def find(document, framework, text):
    """The changes.json entry `text` names in `document` (framework's store); ChoiceError
    naming the nearest ids where none matches."""
    wanted = parse(text)
    if wanted[0] != framework:
        raise ChoiceError(f"{text!r} names a {wanted[0]} change; this store is {framework}'s")
    for change in document.get("changes") or []:
        if of(framework, change) == SEPARATOR.join(wanted[:4]) + SEPARATOR + f"{wanted[4]}->{wanted[5]}":
            return change
    series = [of(framework, c) for c in document.get("changes") or []
              if (c["workload"], c["mode"]) == wanted[1:3] and not c["advisory"]]
    near = ", ".join(series[:6]) or "none of that workload and mode"
    raise ChoiceError(f"no change {SEPARATOR.join(wanted[:4])}:{wanted[4]}->{wanted[5]} in {framework}'s store; "
                      f"its changes of {wanted[1]} {wanted[2]}: {near}")


def group_members(document, change):
    """The changes of `change`'s group (same workload, mode and release pair), in the
    page's order of figures (the lead first)."""
    key = confirm.group_key(change)
    order = list(confirm.detect.FIGURES)
    members = [c for c in document.get("changes") or [] if confirm.group_key(c) == key]
    return sorted(members, key=lambda c: order.index(c["figure"]) if c["figure"] in order else len(order))
