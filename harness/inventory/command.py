"""`python -m harness list`: workloads with sizes, frameworks with versions, devices.

Workloads and framework versions come from this process without importing any
framework (package metadata only). Devices need the framework imported (is there a
GPU it can use?), so each framework is probed in a child process of its own,
``python -m harness.inventory.command --probe NAME``, a few at a time; ``--no-probe`` skips
that and prints what metadata alone says.
"""

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from harness import frameworks, workloads
from harness.choices import SIZES
from harness.units import GIB, KIB, MIB

PROBE_TIMEOUT_S = 180
PARALLEL_PROBES = 3  # imports are mostly disk and one core each; 3 keeps 2 cores busy


def add_arguments(parser):
    parser.add_argument("--no-probe", action="store_true",
                        help="do not import the frameworks to find their devices (fast)")
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")


def main(args):
    listing = {"workloads": describe_workloads(), "frameworks": describe_frameworks(probe=not args.no_probe)}
    print(json.dumps(listing, indent=2) if args.json else format_listing(listing))
    return 0


def describe_workloads():
    out = []
    for name in workloads.NAMES:
        module = workloads.get(name)
        out.append({
            "name": name,
            "source": module.SOURCE,
            "stresses": module.STRESSES,
            "sizes": {size: dict(module.SIZES[size]) for size in SIZES},
            "batch_axis": module.BATCH_AXIS,
            "bound_bytes_float32": {size: workloads.bound_bytes(name, size, "float32") for size in SIZES},
        })
    return out


def describe_frameworks(probe=True):
    rows = []
    for name in frameworks.NAMES:
        row = {"name": name, "available": False, "reason": "", "versions": {}, "modes": [], "compiled_as": "",
               "devices": None}
        try:
            adapter = frameworks.get(name)
        except ImportError as err:
            row["reason"] = f"its adapter cannot be imported: {err}"
            rows.append(row)
            continue
        ok, reason = adapter.available()
        row.update(available=ok, reason=reason, versions=adapter.versions(), modes=list(adapter.modes),
                   compiled_as=adapter.compiled_as)
        rows.append(row)
    if probe:
        to_probe = [row for row in rows if row["available"]]
        with ThreadPoolExecutor(PARALLEL_PROBES) as pool:
            for row, found in zip(to_probe, pool.map(run_probe, [r["name"] for r in to_probe])):
                if "error" in found:
                    row.update(available=False, reason=f"import failed: {found['error']}")
                else:
                    row.update(devices=found["devices"], import_s=found["import_s"])
    return rows


def run_probe(name):
    """{"devices": [...], "import_s": s} from a child process, or {"error": text}."""
    from harness.sweep.environment import worker_environment

    try:
        env, _ = worker_environment(frameworks.get(name), "gradient")
        done = subprocess.run([sys.executable, "-m", "harness.inventory.command", "--probe", name], env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {PROBE_TIMEOUT_S} s"}
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return {"error": tail[0]}


def probe(name):
    """In the child: import and load the framework, print its devices as JSON."""
    start = time.perf_counter()
    try:
        adapter = frameworks.get(name)
        adapter.load("cpu", "eager")
        found = {"devices": adapter.devices(), "import_s": round(time.perf_counter() - start, 2)}
    except Exception as err:  # reported by the parent as the reason it is unavailable
        found = {"error": f"{type(err).__name__}: {err}"}
    print(json.dumps(found))
    return 0


def format_listing(listing):
    out = ["workloads (sizes: tiny for tests, small for CI and asv, paper = the report's; "
           "bound = float32 bytes a store-everything reverse pass keeps)", ""]
    for w in listing["workloads"]:
        out.append(f"  {w['name']}: {w['stresses']}")
        out.append(f"      from {w['source']}; batch axis {w['batch_axis']} (harness scale)")
        for size, cfg in w["sizes"].items():
            dims = " ".join(f"{k}={v}" for k, v in cfg.items())
            out.append(f"      {size:<6} {dims}  (bound {_mib(w['bound_bytes_float32'][size])})")
    out += ["", "frameworks", ""]
    for f in listing["frameworks"]:
        versions = ", ".join(f"{k} {v}" for k, v in f["versions"].items()) or "-"
        if not f["available"]:
            out.append(f"  {f['name']}: unavailable: {f['reason']}" + (f" [{versions}]" if f["versions"] else ""))
            continue
        devices = "not probed" if f["devices"] is None else ", ".join(f["devices"])
        out.append(f"  {f['name']}: {versions}")
        modes = ", ".join(f["modes"]) + (f" (compiled = {f['compiled_as']})" if f["compiled_as"] else "")
        out.append(f"      modes: {modes}")
        timing = f" (import + load {f['import_s']:.1f} s)" if f.get("import_s") is not None else ""
        out.append(f"      devices: {devices}{timing}")
    return "\n".join(out)


def _mib(n):
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--probe":
        sys.exit(probe(sys.argv[2]))
    sys.exit("usage: python -m harness.inventory.command --probe FRAMEWORK (the listing is `python -m harness list`)")
