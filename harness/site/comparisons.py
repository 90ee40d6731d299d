"""The committed comparison records, one set per device and size, and their pages.

CPU records are results/cpu/*.jsonl (this repository's own sweeps), CUDA records
results/gpu/RUN/*.jsonl (each run's README says the machine and the command); a
schedule log there (tools/gpu_sweep.sh's schedule-N.jsonl, one line per pass: told by
its lines, harness/sweep/pass_log.py) is not records and is left out. A set
is every record of one device and size across those files, files in path order so a
later run wins for a repeated cell (`harness report`'s rule). Each set becomes
comparison/DEVICE-SIZE/ in the site: its records (records.jsonl) and the comparison
page that `harness report` builds of them.
"""

import glob
import json
import os
from collections import Counter
from dataclasses import dataclass, field

from harness.report.page import write_page
from harness.report.provenance import measured_span
from harness.report.records import load
from harness.site import layout
from harness.sweep import resume
from harness.sweep.pass_log import is_pass_log
from harness.units import GIB

#: where each device's committed records are, relative to the repository's root
SOURCES = {"cpu": ("results/cpu/*.jsonl",), "cuda": ("results/gpu/*/*.jsonl",)}
SIZE_ORDER = ("tiny", "small", "paper")
#: how each set is refreshed (docs/site.md says more)
REFRESH = {
    "cpu": "nice -n 10 python -m harness run --size {size} --out results/cpu/{size}.jsonl "
           "(add --resume to complete a run that was stopped)",
    "cuda": "tools/gpu_sweep.sh --budget 480 OUT on a GPU machine, then commit OUT/*.jsonl under "
            "results/gpu/DATE-GPU/ with a README naming the command",
}


@dataclass
class RecordSet:
    device: str
    size: str
    records: list
    files: list = field(default_factory=list)  # source files, relative to the root

    @property
    def name(self):
        return f"{self.device}-{self.size}"

    @property
    def folder(self):
        return f"comparison/{self.name}"


def find(root):
    """Every committed record set under `root`: [RecordSet], CPU first, small before paper."""
    sets = {}
    for device, patterns in SOURCES.items():
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                if is_pass_log(path):  # a sweep's schedule log beside its records
                    continue
                rel = os.path.relpath(path, root)
                for record in load([path]):
                    if (record.get("device") or "cpu") != device:
                        continue
                    key = (device, record.get("size") or "?")
                    found = sets.setdefault(key, RecordSet(device, key[1], []))
                    found.records.append(record)
                    if rel not in found.files:
                        found.files.append(rel)
    for found in sets.values():  # the page keeps a cell's last record: the newest measurement wins
        found.records.sort(key=lambda r: (r.get("provenance") or {}).get("started_at") or "")
    order = {name: i for i, name in enumerate(SIZE_ORDER)}
    return [sets[k] for k in sorted(sets, key=lambda k: (list(SOURCES).index(k[0]), order.get(k[1], 9), k[1]))]


def write_pages(record_sets, out_dir):
    """comparison/NAME/records.jsonl and index.html per set; returns {name: index path}."""
    pages = {}
    for record_set in record_sets:
        folder = os.path.join(out_dir, record_set.folder)
        os.makedirs(folder, exist_ok=True)
        data = os.path.join(folder, "records.jsonl")
        with open(data, "w", encoding="utf-8") as handle:
            for record in record_set.records:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
        title = f"gradmem comparison: {record_set.device.upper()} {record_set.size}"
        pages[record_set.name] = write_page([data], folder, title=title)
        layout.with_home_link(pages[record_set.name], depth=2)
    return pages


def summary(record_set):
    """When, where and with what a set was measured: {"when", "machine", "gpu", "python",
    "versions", "commits", "cells", "superseded"} from the records' provenance (distinct
    values); "cells" counts each cell once by status, its newest record's, and
    "superseded" the older records of cells measured again."""
    machines, gpus, pythons, commits = Counter(), Counter(), Counter(), Counter()
    versions = {}
    for record in record_set.records:
        provenance = record.get("provenance") or {}
        machine = provenance.get("machine") or {}
        if machine:
            memory = machine.get("mem_total_bytes")
            machines[f"{machine.get('cpu_model', '?')}, {machine.get('cpus', '?')} CPUs"
                     + (f", {memory / GIB:.0f} GiB" if isinstance(memory, (int, float)) else "")] += 1
        gpu = (provenance.get("settings") or {}).get("gpu")
        if gpu:
            gpus[gpu] += 1
        if provenance.get("python"):
            pythons[provenance["python"]] += 1
        if provenance.get("git_commit"):
            commits[str(provenance["git_commit"])[:12]] += 1
        for name, version in (provenance.get("versions") or {}).items():
            versions.setdefault(name, Counter())[str(version)] += 1
    # a cell measured twice is shown once (its newest record): count cells, not records
    newest = {resume.key(record): record for record in record_set.records}
    statuses = Counter(record.get("status") for record in newest.values())
    superseded = len(record_set.records) - len(newest)
    return {
        "when": measured_span(record_set.records),
        "machine": [m for m, _ in machines.most_common()],
        "gpu": [g for g, _ in gpus.most_common()],
        "python": [p for p, _ in pythons.most_common()],
        "versions": {name: sorted(found) for name, found in sorted(versions.items())},
        "commits": [c for c, _ in commits.most_common()],
        "cells": dict(statuses),
        "superseded": superseded,
    }
