"""Released versions of a distribution on the package index, asked through pip.

``pip index versions NAME`` answers with every release pip may install here (pip's
own configuration applies: index URL, find-links, constraints files). Releases only:
pre-releases join when one of the versions asked about is itself a pre-release.

Offline (CI, tests, an air-gapped machine), ``GRADMEM_INDEX_VERSIONS`` names a JSON
file ``{"distribution": ["1.0", "1.1", ...]}`` read instead of asking the index.
"""

import functools
import json
import os
import subprocess
import sys

from harness.choices import ChoiceError

OFFLINE_VARIABLE = "GRADMEM_INDEX_VERSIONS"
PIP_TIMEOUT_S = 120


def _version_class():
    try:
        from packaging.version import Version
    except ImportError:  # pip always brings its own copy
        from pip._vendor.packaging.version import Version
    return Version


def parse(text):
    return _version_class()(text)


def sort_key(text):
    try:
        return (1, parse(text))
    except Exception:  # noqa: BLE001 - an index may list a legacy version string
        return (0, text)


class IndexError_(RuntimeError):
    """The index could not be asked (no network, pip failing); the message says why."""


@functools.lru_cache(maxsize=None)
def released_versions(dist, pre=False):
    """Every version of `dist` on the index, oldest first."""
    offline = os.environ.get(OFFLINE_VARIABLE)
    if offline:
        with open(offline, encoding="utf-8") as handle:
            listed = json.load(handle).get(dist, [])
    else:
        listed = _ask_pip(dist, pre)
    if not pre:
        listed = [v for v in listed if not is_prerelease(v)]
    return tuple(sorted(set(listed), key=sort_key))


def is_prerelease(text):
    try:
        return parse(text).is_prerelease
    except Exception:  # noqa: BLE001
        return False


def _ask_pip(dist, pre):
    command = [sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check"]
    if pre:
        command.append("--pre")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise IndexError_(f"could not ask the package index for {dist}'s versions: {err}") from None
    for line in done.stdout.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    if done.returncode != 0 and "No matching distribution" in (done.stderr + done.stdout):
        return []
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    raise IndexError_(f"could not ask the package index for {dist}'s versions: {' | '.join(tail) or done.returncode}")


def nearest(version, versions, count=4):
    """The `count` released versions nearest to `version` in version order (a window
    around where it would sit)."""
    ordered = sorted(set(versions), key=sort_key)
    try:
        wanted = (1, parse(version))
        place = sum(1 for v in ordered if sort_key(v) < wanted)
    except Exception:  # noqa: BLE001
        place = len(ordered)
    first = max(0, min(place - count // 2, len(ordered) - count))
    return ordered[first : first + count]


def check_exists(dist, version, what=None):
    """ChoiceError naming the nearest released versions when `version` of `dist` is not on
    the index; IndexError_ when the index cannot be asked."""
    versions = released_versions(dist, pre=is_prerelease(version))
    if any(_same(v, version) for v in versions):
        return
    near = nearest(version, versions)
    what = what or dist
    if not versions:
        raise ChoiceError(f"{what}: the package index has no release of {dist!r}")
    raise ChoiceError(
        f"{what} {version} does not exist on the package index; nearest released versions of {dist}: {', '.join(near)}"
    )


def _same(a, b):
    try:
        return parse(a) == parse(b)
    except Exception:  # noqa: BLE001
        return a == b


def between(dist, good, bad):
    """The released versions strictly between `good` and `bad` (either order), oldest first."""
    pre = is_prerelease(good) or is_prerelease(bad)
    lo, hi = sorted((parse(good), parse(bad)))
    return [v for v in released_versions(dist, pre=pre) if lo < parse(v) < hi]
