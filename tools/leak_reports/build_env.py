"""Build a pinned release's environment with the packages a leak report's native step
needs besides its framework (timm for pytorch#104773), by gradmem's own builder.

A native step runs in its framework's environment (harness/versions/envs.py), which
holds the framework, NumPy and gradmem. A report written against a model library
(timm) needs that library there too, at the version of the report's time: this builds
the environment `NAME-VERSION` with the extra requirements in the same one `pip
install` (so pip resolves them against the pinned framework: torchvision 0.15.2 for
torch 2.0.1), its manifest naming their exact versions, which every record measured
there carries (`provenance.versions`). It goes into a cache directory of its own
($GRADMEM_ENV_DIR, required with --with): `harness run --framework torch==2.0.1` takes
the environment of that name it finds there, and no other sweep takes one with extras
for the plain release.

    GRADMEM_ENV_DIR=~/.cache/gradmem/envs-leak-timm .venv/bin/python tools/leak_reports/build_env.py \
        --framework torch --version 2.0.1 --python '<3.11' --torch-index pypi \
        --with timm==0.9.2 --with torchvision==0.15.2

Prints the environment's path and its versions. Exit 2 on bad input, 1 when pip or the
adapter's load fails (pip's last lines).
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from harness import frameworks  # noqa: E402
from harness.frameworks.base import Unavailable  # noqa: E402
from harness.versions import envs, interpreters  # noqa: E402

REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][A-Za-z0-9.+!-]*$")


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", required=True)
    parser.add_argument("--version", required=True, help="an exact release, e.g. 2.0.1")
    parser.add_argument("--python", help="a PEP 440 specifier the environment's Python must satisfy, e.g. '<3.11'")
    parser.add_argument("--with", dest="extras", action="append", default=[],
                        help="another exact requirement, NAME==VERSION (repeatable)")
    parser.add_argument("--torch-index", help="as for harness run: pypi or an index URL")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.framework not in frameworks.NAMES:
        fail(f"unknown framework {args.framework!r}; choose from {', '.join(frameworks.NAMES)}")
    adapter = frameworks.get(args.framework)
    bad = [r for r in args.extras if not REQUIREMENT.match(r)]
    if bad:
        fail(f"--with takes exact pins NAME==VERSION, not {', '.join(bad)}")
    if args.extras and not os.environ.get("GRADMEM_ENV_DIR"):
        fail("--with needs GRADMEM_ENV_DIR: an environment with extras lives in a cache of its own, "
             "never where sweeps take the plain release")
    options, pinned = [], adapter.pinned_requirement(args.version)
    if adapter.index_must_be_named:
        if not args.torch_index:
            fail(f"{adapter.name}=={args.version}: {adapter.index_must_be_named}")
        if args.torch_index == "pypi":
            pinned = pinned.replace("==", "===", 1)  # PyPI's build exactly, as envs.py does
        else:
            options = ["--index-url", args.torch_index, "--extra-index-url", "https://pypi.org/simple"]
    python = None
    if args.python:
        envs.require_python(args.python)
        if not envs._admits(args.python, sys.version.split()[0]):
            found, looked = interpreters.find(args.python)
            if found is None:
                fail(f"no Python here admits {args.python} (looked at: {', '.join(looked) or 'none'})")
            python = found[0]
    requirements = [pinned, *args.extras] + envs.runtime_pins(exclude=(adapter.package,), also=adapter.adapter_requires)
    dists = (adapter.distributions + (adapter.package,) + tuple(adapter.adapter_requires) + ("scipy",)
             + tuple(r.split("==")[0] for r in args.extras))
    try:
        env = envs.build_loading(adapter.name, f"{adapter.name}-{args.version}", requirements, options, dists,
                                 python=python)
    except Unavailable as err:
        print(f"unavailable: {err}", file=sys.stderr)
        return 1
    print(env.path)
    print(json.dumps({"python": env.manifest.get("python"), "versions": env.versions,
                      "dependency_differs": env.manifest.get("dependency_differs")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
