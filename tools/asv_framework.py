#!/usr/bin/env python
"""Write an asv configuration that runs gradmem's benchmarks over a *framework's* commits.

    .venv/bin/python tools/asv_framework.py --framework autograd --repo ~/src/autograd \\
        --dir out/asv-autograd --workloads rnn_fanout
    cd out/asv-autograd && asv run v1.7.0..master && asv publish && asv find A..B PeakMemory.track_backward

asv's `repo` is the framework's checkout (the django-asv pattern; HIPS autograd #219
ran `asv run 3d018e8..HEAD` on autograd's own commits): asv builds a wheel of the
framework at each commit (`pip wheel --no-deps`, its own build backend) and installs
it into a virtualenv that already holds gradmem's runtime requirements and the
adapter's (SciPy for autograd), pinned to this environment's versions, and gradmem itself: a wheel of this checkout built now, into
DIR/wheels, installed with --no-deps at every commit (a fixed dependency: the same
harness measures every commit). The benchmarks are gradmem's own (benchmark_dir is
this checkout's benchmarks/, read at each run), their sweep narrowed with asv's
`env_nobuild` matrix to the framework and the chosen workloads, size, modes and device.

Compiled frameworks (torch, JAX, TensorFlow) build from source through asv's
build_command, which this writes as `pip wheel`: hours per commit unless you give
--build-command. Exit 2 for a bad argument.
"""

import argparse
import json
import os
import subprocess
import sys

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT)

from harness import choices, cli_options, frameworks, workloads  # noqa: E402
from harness.versions import envs  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", required=True, help=f"one of {', '.join(frameworks.NAMES[1:])}")
    parser.add_argument("--repo", required=True, help="a git checkout of the framework")
    parser.add_argument("--dir", required=True, help="where asv.conf.json, env/, results/, html/ and wheels/ go")
    parser.add_argument("--branch", default=None, help="the branch asv publishes (default: the checkout's current one)")
    cli_options.add_axes(parser, workload="all", size="small", device="cpu", mode="eager", single=("size",))
    parser.add_argument("--optimizer", default="none", metavar="OPT",
                        help=f"one of {', '.join(choices.OPTIMIZERS)}, none (default none)")
    parser.add_argument(
        "--requirements-of", default=None, metavar="REV",
        help="pin the requirements the adapter names for commit REV's era (2017 autograd: NumPy 1.23.5, "
        "SciPy 1.15.3, future) instead of this environment's versions",
    )
    parser.add_argument(
        "--results-dir", default=None, help="where asv keeps results (default DIR/results; e.g. a committed results/ folder)",
    )
    parser.add_argument(
        "--build-command", default="python -m pip wheel --no-deps -w {build_cache_dir} {build_dir}",
        help="asv build_command turning a checkout into a wheel (default: pip wheel with the project's own backend)",
    )
    return parser.parse_args(argv)


def check(args):
    name = choices.check_choice("framework", args.framework, frameworks.NAMES)
    if frameworks.get(name).package is None:
        raise choices.ChoiceError(f"{name} is gradmem's own engine: its history is gradmem's (asv.conf.json)")
    choices.parse_choices("workload", args.workload, workloads.NAMES)
    choices.check_choice("size", args.size, choices.SIZES)
    choices.parse_choices("mode", args.mode, choices.MODES)
    choices.parse_choices("device", args.device, choices.DEVICES)
    choices.check_choice("optimizer", args.optimizer, choices.OPTIMIZERS + ("none",))
    done = subprocess.run(["git", "-C", args.repo, "rev-parse", "--git-dir"], capture_output=True, text=True)
    if done.returncode != 0:
        raise choices.ChoiceError(f"--repo {args.repo}: not a git checkout ({done.stderr.strip()})")
    branch = subprocess.run(["git", "-C", args.repo, "symbolic-ref", "--short", "-q", "HEAD"], capture_output=True, text=True)
    if not args.branch and branch.returncode != 0:
        raise choices.ChoiceError(f"--repo {args.repo}: HEAD is detached; name the branch asv publishes with --branch")
    return args.branch or branch.stdout.strip()


def gradmem_wheel(directory):
    """A wheel of this checkout in `directory` (the fixed dependency), replacing older ones."""
    os.makedirs(directory, exist_ok=True)
    for old in os.listdir(directory):
        if old.startswith("gradmem-") and old.endswith(".whl"):
            os.unlink(os.path.join(directory, old))
    return envs.build_gradmem_wheel(directory, os.path.join(directory, "build.log"))


def config(args, branch, wheel):
    work = os.path.abspath(args.dir)
    workload_list = ",".join(choices.parse_choices("workload", args.workload, workloads.NAMES))
    adapter = frameworks.get(args.framework)  # gradmem's and the adapter's requirements, as installed here
    requirements = envs.runtime_pins(also=adapter.adapter_requires)
    era = None
    if args.requirements_of and hasattr(adapter, "commit_requirements"):
        era = adapter.commit_requirements(args.repo, args.requirements_of)
    if era is not None:  # an older era's pins replace this environment's (asv: one env for the range)
        requirements = list(era[1])
    pins = {p.split("==")[0]: [p.split("==")[1]] for p in requirements if "==" in p}
    return {
        "version": 1,
        "project": args.framework,
        "repo": os.path.abspath(args.repo),
        "dvcs": "git",
        "branches": [branch],
        "environment_type": "virtualenv",
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"],
        "matrix": {
            "req": pins,
            # read by gradmem's benchmarks/common.py in the benchmark processes only
            "env_nobuild": {
                "GRADMEM_ASV_FRAMEWORKS": [args.framework],
                "GRADMEM_ASV_WORKLOADS": [workload_list],
                "GRADMEM_ASV_SIZE": [args.size],
                "GRADMEM_ASV_MODES": [args.mode],
                "GRADMEM_ASV_DEVICES": [args.device],
                "GRADMEM_ASV_OPTIMIZER": [args.optimizer],
            },
        },
        "build_command": [args.build_command],
        "install_command": [
            "in-dir={env_dir} python -m pip install {wheel_file} --force-reinstall --no-deps",
            f"in-dir={{env_dir}} python -m pip install {wheel} --no-deps",
        ],
        "uninstall_command": ["return-code=any python -m pip uninstall -y {project}"],
        "build_cache_size": 8,
        "benchmark_dir": os.path.join(PROJECT, "benchmarks"),
        "env_dir": os.path.join(work, "env"),
        "results_dir": os.path.abspath(args.results_dir) if args.results_dir else os.path.join(work, "results"),
        "html_dir": os.path.join(work, "html"),
        "launch_method": "forkserver",
        "default_benchmark_timeout": 1800,
        "regressions_thresholds": {".*Memory\\..*": 0.02, "bench_time\\..*": 0.10},
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        branch = check(args)
    except choices.ChoiceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    wheel = gradmem_wheel(os.path.join(os.path.abspath(args.dir), "wheels"))
    path = os.path.join(os.path.abspath(args.dir), "asv.conf.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config(args, branch, wheel), handle, indent=2)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
