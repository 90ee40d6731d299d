"""What a figure was measured on: commit, machine, Python, versions (cheap, no imports)."""

import datetime
import functools
import importlib.metadata
import os
import platform
import subprocess
import sys

# the checkout: harness/origin.py -> harness/ -> the repository root
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=1)
def git_commit():
    """HEAD of the checkout the harness runs from, with "+dirty" when tracked files
    differ from it; "unknown" outside a git checkout."""
    def git(*args):
        return subprocess.run(
            ["git", "-C", PACKAGE_DIR, *args], capture_output=True, text=True, timeout=20, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def machine():
    info = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "mem_total_bytes": _meminfo("MemTotal"),
        "transparent_hugepage": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "libc": " ".join(platform.libc_ver()),
    }
    return info


def machine_label(machine):
    """A recorded machine (provenance's "machine" or "time_machine") as one name: its
    host name with its platform, "vm (Linux-6.18...-x86_64-...)". The platform is part
    of the name because a host name alone does not tell machines apart: the lent VMs
    are all "vm", a CPU box and a GPU box alike, and the kernel build is what differs.
    None where neither is recorded (records from before machines were named)."""
    if not isinstance(machine, dict):
        return None
    host, build = machine.get("hostname"), machine.get("platform")
    return f"{host} ({build})" if host and build else host or build or None


def _provenance(record):
    return record.get("provenance") if isinstance(record.get("provenance"), dict) else {}


def measured_on(record):
    """The machine that measured `record`'s memory figures (machine_label)."""
    return machine_label(_provenance(record).get("machine"))


def timed_on(record):
    """The machine that took `record`'s times (machine_label): a cluster's record names
    its node. Times from two machines are never compared: the table's and the page's
    comparisons stay within one."""
    provenance = _provenance(record)
    return machine_label(provenance.get("time_machine") or provenance.get("machine"))


def same_host(record, other):
    """False only when both records name their hosts and the hosts differ."""
    mine, theirs = timed_on(record), timed_on(other)
    return mine is None or theirs is None or mine == theirs


def python():
    return sys.version.split()[0]


def versions(adapter):
    found = {"gradmem": _version("gradmem"), "numpy": _version("numpy")}
    found.update(adapter.versions())
    return {k: v for k, v in found.items() if v}


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model():
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _meminfo(key):
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None
