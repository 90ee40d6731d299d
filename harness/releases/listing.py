"""The releases of a distribution in a range, as the package index publishes them.

PyPI's JSON API (https://pypi.org/pypi/NAME/json) says which releases are yanked and
when each was uploaded; `pip index versions` (harness/versions/index.py: pip's own
configuration, or GRADMEM_INDEX_VERSIONS offline) is the fallback, and then yanked
releases cannot be told apart (pip leaves them out of its list) and the sweep says so.
Pre-releases are never swept (a release axis is what users install).
"""

import json
import os
import urllib.request
from typing import NamedTuple

from harness.choices import ChoiceError
from harness.versions import index

PYPI_JSON = "https://pypi.org/pypi/{}/json"
TIMEOUT_S = 30


class Release(NamedTuple):
    version: str
    uploaded: str  # ISO date of its first file, "" when unknown
    yanked: str  # why it was yanked ("" = not yanked; "yanked" when no reason given)
    requires_python: str = ""  # its files' Requires-Python, as PyPI says ("" = none or unknown)


def published(dist):
    """([Release] oldest first, where the list came from)."""
    if not os.environ.get(index.OFFLINE_VARIABLE):
        try:
            with urllib.request.urlopen(PYPI_JSON.format(dist), timeout=TIMEOUT_S) as reply:
                data = json.load(reply)
            return _from_json(data), "PyPI JSON API"
        except (OSError, ValueError):
            pass
    versions = index.released_versions(dist)  # IndexError_ when no index answers
    return [Release(v, "", "") for v in versions], "pip index versions (yanked releases not listed by pip)"


def _from_json(data):
    out = []
    for version, files in (data.get("releases") or {}).items():
        if not files or index.is_prerelease(version):
            continue
        yanked = all(f.get("yanked") for f in files)
        reason = next((f.get("yanked_reason") for f in files if f.get("yanked_reason")), "") or "yanked"
        uploaded = min((f.get("upload_time") or "") for f in files)[:10]
        needs = next((f.get("requires_python") for f in files if f.get("requires_python")), "") or ""
        out.append(Release(version, uploaded, reason if yanked else "", needs))
    return sorted(out, key=lambda r: index.sort_key(r.version))


def in_range(releases, first=None, last=None):
    """The releases from `first` to `last` inclusive (either may be None: open)."""
    lo = index.parse(first) if first else None
    hi = index.parse(last) if last else None
    if lo is not None and hi is not None and lo > hi:
        raise ChoiceError(f"--from {first} is newer than --to {last}: give the older release as --from")
    chosen = []
    for release in releases:
        try:
            version = index.parse(release.version)
        except Exception:  # noqa: BLE001 - a legacy version string cannot be placed in a range
            continue
        if (lo is None or version >= lo) and (hi is None or version <= hi):
            chosen.append(release)
    return chosen
