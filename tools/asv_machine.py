#!/usr/bin/env python
"""Write asv's machine file (~/.asv-machine.json) with stable fields.

asv keys every graph on the machine fields. `asv machine --yes` records the kernel
release and the hostname (random on hosted CI runners), so a kernel update or a new
runner would start a new series. This writes only facts that stay put for a machine
*type*: architecture, CPU model, CPU count, RAM rounded to GiB, the OS name without
its release, and the GPU model (nvidia-smi) when there is one. Other machines already
in the file are kept, so one file can describe several.

    python tools/asv_machine.py                     # name derived: linux-x86_64-2cpu-nogpu
    python tools/asv_machine.py --machine gpu-a100  # an explicit name
    python tools/asv_machine.py --suffix small      # linux-x86_64-2cpu-nogpu-small
then pass the printed name to asv: `asv run --machine NAME ...`.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys

MACHINE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return re.sub(r"\s+", " ", line.split(":", 1)[1]).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib():
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return round(pages * page_size / 2**30)
    except (ValueError, OSError, AttributeError):
        return 0


def gpu_models():
    """Names of the NVIDIA GPUs (empty without nvidia-smi or a GPU)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def describe(name=None, suffix=None):
    gpus = gpu_models()
    num_cpu = os.cpu_count() or 1
    gpu_text = f"{len(gpus)}x {gpus[0]}" if gpus else ""
    default_name = f"{platform.system().lower()}-{platform.machine()}-{num_cpu}cpu-" + (
        slug(gpus[0]) if gpus else "nogpu"
    )
    name = name or default_name + (f"-{suffix}" if suffix else "")
    if not MACHINE_NAME.match(name):
        raise ValueError(f"machine name {name!r}: use letters, digits, '.', '_' and '-'")
    return {
        "machine": name,
        "arch": platform.machine(),
        "cpu": cpu_model() + (f" + {gpu_text}" if gpu_text else ""),
        "num_cpu": str(num_cpu),
        "os": platform.system(),
        "ram": f"{ram_gib()}GiB",
    }


def write(info, path):
    machines = {"version": 1}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            machines = json.load(handle)
    machines[info["machine"]] = info
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(machines, handle, indent=4, sort_keys=True)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machine", help="machine name (default derived from arch, CPUs, GPU)")
    parser.add_argument("--path", default=os.path.expanduser("~/.asv-machine.json"),
                        help="machine file (asv reads ~/.asv-machine.json)")
    parser.add_argument("--suffix", help="appended to the derived name (e.g. the sweep size: the size is "
                        "not part of asv's keys, so one machine name per size keeps series apart)")
    args = parser.parse_args(argv)
    try:
        info = describe(args.machine, args.suffix)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write(info, args.path)
    print(info["machine"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
