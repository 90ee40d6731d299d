#!/usr/bin/env python
"""Move stored asv results to another environment name (migrate old result sets).

An environment's name and keys ("python" and one key per package) decide which results
form one series. Results recorded under asv's `existing` environment carry the
interpreter's path (`existing-py_tmp_gradmem-asv-venv_bin_python`, "python":
"/tmp/gradmem-asv-venv/bin/python"); this renames them to the `installed`
environment's name and keys (harness/asv_env.py) for the interpreter they were
measured with, so they join the series new runs make. Figures are not touched.

    python tools/asv_rename_env.py --machine linux-x86_64-2cpu-nogpu-small \\
        --from existing-py_tmp_gradmem-asv-venv_bin_python --to-installed .venv/bin/python

--to-installed names an interpreter with the same Python and package versions as the
one that recorded the results (its versions become the keys: check them). Add
--dry-run to see what would change. Exit 2 when nothing matches or a target exists.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def target_environment(python, package_names):
    """(name, python version, {package: version}) of the `installed` environment of `python`."""
    from harness.asv_env import env_name, installed_versions

    found = installed_versions(python, package_names)
    return env_name(found["python"], found["versions"]), found["python"], found["versions"]


def renamed(data, name, python, versions):
    """A copy of one result file's JSON under the new environment (figures unchanged)."""
    old_packages = data.get("requirements") or {}
    params = {k: v for k, v in data["params"].items() if k not in old_packages}
    return dict(data, env_name=name, python=python, requirements=dict(versions),
                params=dict(params, python=python, **versions))


def main(argv=None):
    from asv import util
    from asv.config import Config
    from asv.results import get_filename

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="asv.conf.json")
    parser.add_argument("--machine", required=True, help="results/<machine>/ to migrate")
    parser.add_argument("--from", dest="old", required=True, help="the environment name to replace")
    parser.add_argument("--to-installed", required=True, metavar="PYTHON",
                        help="interpreter whose Python and package versions the results were recorded with")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)

    conf = Config.load(args.config)
    from harness.asv_env import with_framework_pins

    packages = sorted(with_framework_pins(conf.matrix.get("req", {})))
    name, python, versions = target_environment(args.to_installed, packages)
    folder = os.path.join(conf.results_dir, args.machine)
    moved = 0
    for filename in sorted(os.listdir(folder) if os.path.isdir(folder) else []):
        path = os.path.join(folder, filename)
        if filename == "machine.json" or not filename.endswith(".json"):
            continue
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("env_name") != args.old:
            continue
        # asv's own file name for it (hashed once the name reaches 128 characters)
        target = os.path.join(conf.results_dir, get_filename(args.machine, data["commit_hash"], name))
        if os.path.exists(target):
            print(f"error: {target} exists; merge by hand or remove it", file=sys.stderr)
            return 2
        print(f"{os.path.relpath(path)} -> {os.path.basename(target)}")
        if not args.dry_run:
            util.write_json(target, renamed(data, name, python, versions), data["version"], compact=True)
            os.remove(path)
        moved += 1
    if not moved:
        print(f"error: no results of environment {args.old!r} in {folder}", file=sys.stderr)
        return 2
    print(f"{moved} file(s) {'would move' if args.dry_run else 'moved'} to {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
