"""gradmem's own memory pass of a group, today, on this machine: the control of a script that did not reproduce.

A standalone script that does not show a confirmed move has two readings: the move is
in gradmem's measurement (the script leaves out something the harness does), or the
move does not hold here at all (the store was confirmed on another machine, with
environments built then). The harness measuring the same cells again, now, beside the
script's runs, tells them apart: where it reproduces the move and the script does
not, the difference is between the two measurements (harness only); where neither
does, the move is not reproduced here (verdict.py). The passes are the
confirmation's own (harness/sweep/memory_passes.py: each a fresh worker after its
workload's reference gradient), interleaved A B A B, each kept in
FRAMEWORK.upstream.jsonl as a ``"kind": "harness"`` run with the figures the probe
reports, read through the registry.
"""

import time

from harness import figures, interrupts
from harness.releases import detect
from harness.sweep import cells
from harness.sweep.cell_runner import Options
from harness.sweep.memory_passes import MemoryPasses
from harness.units import MIB
from harness.upstream import store, verdict

KIND = "harness"


def held(samples, group):
    """{release: {index: run}} of the harness's runs held for `group`."""
    found = {}
    for sample in samples:
        if sample.get("group") == group and sample.get("kind") == KIND:
            found.setdefault(sample["release"], {})[sample["index"]] = sample
    return found


def run_group(out, framework, group, workload, mode, size, releases, runs, torch_index=None, timeout_s=600.0,
              growth=False, say=print):
    """The harness's memory pass of the group's two cells, `runs` ok ones a side,
    interleaved; returns {release: {index: run}}. With `growth` (a change of the growth
    per step) the leak phase gets the store's budgets (detect.GROWTH_BUDGETS_S), as the
    leak-only pass that measured it did."""
    todo = []
    have = held(store.read_samples(out, framework), group)
    for index in range(1, runs + 1):
        for release in releases:
            if have.get(release, {}).get(index, {}).get("status") != "ok":
                todo.append((index, release))
    if todo:
        options = Options(warmup=1, repeat=3, time_budget_s=1.0, timeout_s=timeout_s, prediction=False,
                          torch_index=torch_index, leak_budgets_s=detect.GROWTH_BUDGETS_S if growth else None)
        plan = [cells.expand([workload], [(framework, release)], [size], ["float32"], ["cpu"], [mode])[0]
                for _, release in todo]
        with MemoryPasses(options, reference=True) as passes:
            for (index, release), (_, record) in zip(todo, passes.run(plan)):
                ok = record.get("status") == "ok"
                sample = {"group": group, "release": release, "index": index, "kind": KIND,
                          "status": "ok" if ok else "failed",
                          "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          "gradmem": ((record.get("provenance") or {}).get("git_commit") or "")[:12],
                          "figures": {name: figures.value(record, name) for name in verdict.MEASURED
                                      if figures.value(record, name) is not None}}
                if not ok:
                    sample["message"] = f"{record.get('status')}: {(record.get('message') or '')[:300]}"
                with interrupts.deferred():
                    store.append_sample(out, framework, sample)
                shown = (f"{sample['figures'].get('retained', 0) / MIB:.2f} MiB retained" if ok
                         else sample["message"])
                say(f"  gradmem's own pass, {release} {index}/{runs}: {shown}", flush=True)
    return held(store.read_samples(out, framework), group)
