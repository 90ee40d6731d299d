"""`--framework` of a sweep, with versions: parsed and checked before anything runs.

A pinned version must exist on the package index (else a ChoiceError naming the nearest
released versions, exit 2); a version whose environment is already cached is not asked
about again (the index may be out of reach). A framework that cannot pin a version
(the reference engine, gradmem's own) is refused.
"""

import sys

from harness import frameworks
from harness.choices import ChoiceError
from harness.versions import envs, index, spec


def plan_frameworks(text):
    """[(name, version or None)] of `--framework`, every pinned version checked."""
    pairs = spec.parse_frameworks(text, frameworks.NAMES)
    for name, version in pairs:
        if version is not None:
            check_pinned(name, version)
    return pairs


def check_pinned(name, version):
    adapter = frameworks.get(name)
    if adapter.package is None:
        pinnable = [n for n in frameworks.NAMES if frameworks.get(n).package]
        raise ChoiceError(
            f"{name}=={version}: {name} has no releases to pin (its code is gradmem's own); "
            f"frameworks whose version can be pinned: {', '.join(pinnable)}"
        )
    if envs.cached(f"{name}-{version}") is not None:
        return
    try:
        index.check_exists(adapter.package, version, what=name)
    except index.IndexError_ as err:  # no index here: the install will say what it can
        print(f"warning: {err}; {name}=={version} not checked", file=sys.stderr)
