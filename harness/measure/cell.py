"""Measure one cell: its passes in fresh workers, merged into one result record.

1. the reference gradient of (workload, size, dtype), once per sweep, in a worker of
   its own: the reference engine in float64 on the cell's own values cast up, so
   `grad_rel_err` measures arithmetic, not input rounding;
2. the memory pass (malloc settings on, RSS timeline sampled from outside);
3. the time pass (default allocator), only when the memory pass succeeded: nothing
   else runs while it does.

`harness scale` asks for the memory pass alone (`memory_only`): no reference gradient
(`harness check` checks gradients) and no time pass, so its records carry null times.

A pass that fails decides the record's status and message; a record that is not "ok"
carries no figures.
"""

import os
from dataclasses import dataclass

from harness import results
from harness.frameworks import threads
from harness.measure import cells, environment, provenance, timeline
from harness.measure.runner import run_worker

#: the memory pass's figures, copied into the record as they are (results.py says
#: what each means; footprint = retained + step peak is checked there)
MEMORY_KEYS = (
    "retained_bytes",
    "retained_detail_bytes",
    "peak_bytes",
    "footprint_bytes",
    "live_bytes",
    "first_step_retained_bytes",
    "first_step_retained_detail_bytes",
    "first_step_peak_bytes",
    "first_step_footprint_bytes",
    "first_step_live_bytes",
    "breakdown_bytes",
    "breakdown_method",
)

MEMORY_ONLY = "not computed: a memory pass alone (harness scale); harness check compares gradients"

#: engines whose arrays are NumPy buffers, which tracemalloc sees (NumPy reports its
#: data allocations to it); zero for torch/JAX/TF, so not measured there
TRACEMALLOC_FRAMEWORKS = ("reference", "autograd", "pytensor")


@dataclass
class Options:
    seed: int = 0
    warmup: int = 1
    repeat: int = 5
    timeout_s: float = 600.0
    memory_limit: int = None
    lr: float = 1e-3


class CellRunner:
    def __init__(self, workdir, options):
        self.workdir = workdir
        self.options = options
        self.reference = {}  # (workload, size, dtype) -> (npz path or None, note)
        self.count = 0

    def _name(self, tag):
        self.count += 1
        return f"{self.count:04d}-{tag}"

    # ---- the reference gradient -------------------------------------------------------
    def reference_gradient(self, cell):
        key = (cell["workload"], cell["size"], cell["dtype"])
        if key not in self.reference:
            self.reference[key] = self._compute_reference(cell)
        return self.reference[key]

    def _compute_reference(self, cell):
        adapter, reason = cells.adapter_or_reason("reference")
        ok, reason = adapter.available() if adapter else (False, reason)
        if not ok:
            return None, f"reference engine unavailable: {reason}"
        name = self._name(f"refgrad-{cell['workload']}-{cell['size']}-{cell['dtype']}")
        out = os.path.join(self.workdir, f"{name}.npz")
        job = {"kind": "reference_gradient", "cell": cell, "seed": self.options.seed, "out_path": out}
        env, _ = environment.worker_environment(adapter, "time")
        outcome = run_worker(job, env, self.workdir, name, timeout_s=self.options.timeout_s)
        if not outcome.ok:
            return None, f"reference gradient failed ({outcome.status}): {outcome.message[:300]}"
        return out, "reference engine, float64, on the cell's values cast to float64"

    # ---- one cell -------------------------------------------------------------------------
    def measure(self, cell, progress=None, memory_only=False):
        """The result record of `cell` (of its memory pass alone with `memory_only`)."""
        adapter, reason = cells.adapter_or_reason(cell["framework"])
        prov = self._provenance(cell, adapter)
        reason = reason or cells.unavailable_reason(cell, adapter)
        if reason:
            return results.new_record(cell, "unavailable", reason, prov)

        ref_path, ref_note = (None, MEMORY_ONLY) if memory_only else self.reference_gradient(cell)
        prov["reference_gradient"] = ref_note
        job = {
            "cell": cell,
            "seed": self.options.seed,
            "optimizer": cell.get("optimizer"),
            "lr": self.options.lr,
            "warmup": self.options.warmup,
            "repeat": self.options.repeat,
            "memory_limit": self.options.memory_limit,
        }
        tag = f"{cell['workload']}-{cell['framework']}-{cell['mode']}-{cell['device']}"

        if progress:
            progress("memory")
        env, recorded = environment.worker_environment(adapter, "memory")
        prov["env"] = recorded
        memory_job = dict(
            job,
            kind="memory",
            tracemalloc=cell["framework"] in TRACEMALLOC_FRAMEWORKS,
            reference_gradient_path=ref_path,
        )
        memory = run_worker(
            memory_job, env, self.workdir, self._name(f"memory-{tag}"), self.options.timeout_s, sample_rss=True
        )
        prov["worker_wall_s"] = {"memory": round(memory.wall_s, 3)}
        if not memory.ok:
            return results.new_record(cell, memory.status, f"memory pass: {memory.message}", prov)
        if memory_only:
            return self._record(cell, prov, memory, None)

        if progress:
            progress("time")
        env, recorded = environment.worker_environment(adapter, "time")
        prov["time_env"] = recorded
        # Times are only as good as the machine is idle: a busy core stalls the BLAS
        # and OpenMP pools (2-4x slower medians seen here). Recorded so a reader can tell.
        load_before = os.getloadavg()[0]
        timing = run_worker(dict(job, kind="time"), env, self.workdir, self._name(f"time-{tag}"), self.options.timeout_s)
        prov["load_average_1min"] = {"before_time_pass": load_before, "after_time_pass": os.getloadavg()[0]}
        prov["worker_wall_s"]["time"] = round(timing.wall_s, 3)
        if not timing.ok:
            return results.new_record(cell, timing.status, f"time pass: {timing.message}", prov)
        return self._record(cell, prov, memory, timing)

    def _record(self, cell, prov, memory, timing):
        m, t = memory.result, (timing.result if timing is not None else {})
        prov.update(
            {
                "settings": m.get("settings"),
                "load_s": {"memory": m.get("load_s"), "time": t.get("load_s")},
                "hwm_method": m.get("hwm_method"),
                "runtime_warmup": m.get("runtime_warmup"),
                "plan_s": {"memory": m.get("plan_s"), "time": t.get("plan_s")},
                "baseline_rss_bytes": m.get("baseline_rss_bytes"),
            }
        )
        if cell["framework"] == "reference" and m.get("order"):
            cell = dict(cell, order=m["order"])
        memory_figures = {key: m.get(key) for key in MEMORY_KEYS}
        record = results.new_record(
            cell,
            "ok",
            provenance=prov,
            **memory_figures,
            bound_bytes=m["bound_bytes"],
            tracemalloc_peak_bytes=m.get("tracemalloc_peak_bytes"),
            device_memory=m.get("device_memory"),
            time_s=t.get("time_s"),
            time_spread_s=t.get("time_spread_s"),
            compile_s=t.get("compile_s"),
            grad_rel_err=m.get("grad_rel_err"),
            timeline=timeline.build(memory.sampler, memory.marks) if memory.sampler else None,
            # additions to the schema (keys may be added):
            step_kind=m.get("step_kind"),
            first_step_time_s=t.get("first_step_time_s"),
            time_samples_s=t.get("time_samples_s"),
            grad_check=m.get("grad_check"),
            steady_samples=m.get("steady_samples"),
        )
        try:  # every ok record written follows the schema (footprint = retained + peak ...)
            return results.validate(record)
        except results.SchemaError as err:
            return results.new_record(cell, "error", f"harness bug, record not written as ok: {err}", prov)

    def _provenance(self, cell, adapter):
        o = self.options
        return {
            "versions": provenance.versions(adapter) if adapter else {},
            "git_commit": provenance.git_commit(),
            "machine": provenance.machine(),
            "python": provenance.python(),
            "env": {},
            "threads": threads.thread_count(),
            "seed": o.seed,
            "started_at": provenance.now_iso(),
            "warmup_steps": o.warmup,
            "time_repeats": o.repeat,
            "timeout_s": o.timeout_s,
            "memory_limit_bytes": o.memory_limit,
            "time_spread": "interquartile range (75th - 25th percentile, linear interpolation)",
            "peak_method": (
                "step peak = VmHWM - RSS at the step's start; retained = RSS at the step's start - "
                "baseline RSS (after gc + malloc_trim, before the first step); footprint = retained + step peak"
            ),
        }
