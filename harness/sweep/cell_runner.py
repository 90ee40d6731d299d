"""Measure one cell: its passes in fresh workers, merged into one result record.

1. the reference gradient of (workload, size, dtype), once per sweep, in a worker of
   its own: the reference engine in float64 on the cell's own values cast up, so
   `grad_rel_err` measures arithmetic, not input rounding;
2. the memory pass (malloc settings on, RSS timeline sampled from outside);
3. the time pass (default allocator), only when the memory pass succeeded: nothing
   else runs while it measures (`gated`: it sets up beside other passes, then waits
   until the machine is its alone).

A CUDA memory pass runs alone unless NVML answers per process (cuda_sharing.py); its
record says which (``provenance.cuda_concurrency``).

`CellRunner` makes the passes (executor Tasks) and turns their outcomes into the
record; *when* each runs is the schedule's business (harness/sweep/schedule.py).

`harness scale` asks for the memory pass alone (`start(..., memory_only=True)`): no
reference gradient (`harness check` checks gradients) and no time pass, so its
records carry null times (`memory_record`).

A pass that fails decides the record's status and message; a record that is not "ok"
carries no figures.
"""

import re
from dataclasses import dataclass

from harness import results, workloads
from harness.frameworks import threads
from harness import origin
from harness.sweep import cells, environment, timeline
from harness.sweep.cuda_sharing import CudaMemorySharing
from harness.sweep.executor import Task
from harness.measure.timing import Policy
from harness.frameworks.base import Unavailable
from harness.steps import contract as native
from harness.versions import code_link, envs

MEMORY_ONLY = "not computed: a memory pass alone (harness scale); harness check compares gradients"

@dataclass(frozen=True)
class Setting:
    """One sweep setting every record carries: its provenance key, its `Options` field,
    and the command-line option that sets it (what `--resume` names when they differ)."""

    key: str
    field: str
    option: str


#: The sweep's settings, the one list: the record's provenance carries each
#: (`Options.settings()`), and `--resume` refuses records measured with other values
#: of any of them (resume.py). A setting added here is recorded and checked both.
SETTINGS = (
    Setting("seed", "seed", "--seed"),
    Setting("warmup_steps", "warmup", "--warmup"),
    Setting("time_repeats", "repeat", "--repeat"),
    Setting("time_precision", "precision", "--precision"),
    Setting("time_budget_s", "time_budget_s", "--time-budget"),
    Setting("threads", "threads", "--threads"),
    Setting("timeout_s", "timeout_s", "--timeout"),
    Setting("memory_limit_bytes", "memory_limit", "--memory-limit"),
)


@dataclass
class Options:
    seed: int = 0
    warmup: int = 1
    repeat: int = 5  # the time pass's minimum number of timed steps
    precision: float = Policy.precision  # ... then on until the median is known this well
    time_budget_s: float = Policy.budget_s  # ... or this many seconds of timed steps are spent
    threads: int = None  # every framework's thread count (None: $GRADMEM_THREADS or 2)
    timeout_s: float = 600.0
    memory_limit: int = None
    lr: float = 1e-3
    torch_index: str = None  # where a pinned torch version may come from (harness/versions/envs.py)
    prediction: bool = True  # ask the framework for its own prediction (harness/measure/prediction.py)
    matmul_precision: str = "highest"  # float32 products on a GPU (choices.MATMUL_PRECISIONS)
    # (short, long) seconds the leak phase's extra steps may take (None: its share of the
    # pass, measure/leak.py budgets); a pass run for its growth alone gives it more
    leak_budgets_s: tuple = None

    def settings(self):
        """{provenance key: value} of SETTINGS; threads resolved (None: the default count)."""
        values = {s.key: getattr(self, s.field) for s in SETTINGS}
        if values["threads"] is None:
            values["threads"] = threads.thread_count()
        return values


@dataclass
class CellState:
    """One cell on its way through its passes."""

    index: int
    cell: dict
    adapter: object
    prov: dict
    job: dict
    memory: object = None  # the memory pass's Outcome, once it ended
    memory_only: bool = False  # harness scale: no reference gradient, no time pass
    python: str = None  # a pinned version's interpreter (None: this one)
    env_of: object = None  # env -> env for that interpreter's workers (None: as it is)
    pinned: dict = None  # the pinned version (executor.Task.pinned), None for this interpreter's
    memory_task: object = None  # the memory pass's Task, once made


def reference_key(cell):
    return (cell["workload"], cell["size"], cell["dtype"])


class CellRunner:
    def __init__(self, workdir, options, gpus=None, jobs=1):
        self.workdir = workdir
        # whether CUDA memory passes may run beside each other (up to `jobs`)
        self.cuda_sharing = CudaMemorySharing(jobs)
        self.options = options
        self.gpus = gpus  # (present, where) of a cluster's nodes (None: this machine decides)
        self.reference = {}  # reference_key -> (npz path or None, note)
        self.count = 0

    def _name(self, tag):
        self.count += 1
        # a file name: an external workload's reference holds "/" and "#" (the count keeps it unique)
        return f"{self.count:04d}-{re.sub(r'[^A-Za-z0-9._=-]', '_', tag)}"

    def _environment(self, adapter, kind):
        return environment.worker_environment(adapter, kind, thread_count=self.options.threads)

    # ---- the reference gradient -------------------------------------------------------
    def reference_task(self, cell):
        """The pass computing `cell`'s reference gradient; None when it is known already
        (or cannot be computed: the note says why)."""
        key = reference_key(cell)
        if key in self.reference:
            return None
        if workloads.native(cell["workload"]) is not None:  # its own code: no op-set gradient to compare
            self.reference[key] = (None, native.GRAD_CHECK)
            return None
        adapter, reason = cells.adapter_or_reason("reference")
        ok, reason = adapter.available() if adapter else (False, reason)
        if not ok:
            self.reference[key] = (None, f"reference engine unavailable: {reason}")
            return None
        name = self._name(f"refgrad-{cell['workload']}-{cell['size']}-{cell['dtype']}")
        out = f"{self.workdir}/{name}.npz"
        job = {"kind": "reference_gradient", "cell": cell, "seed": self.options.seed, "out_path": out}
        env, _ = self._environment(adapter, "time")
        return Task(job, env, name, self.options.timeout_s, tag=("reference", key))

    def reference_done(self, task, outcome):
        key = task.tag[1]
        if outcome.ok:
            self.reference[key] = (task.job["out_path"], "reference engine, float64, on the cell's values cast to float64")
        else:
            self.reference[key] = (None, f"reference gradient failed ({outcome.status}): {outcome.message[:300]}")

    # ---- one cell -------------------------------------------------------------------------
    def start(self, index, cell, memory_only=False):
        """A CellState, or the record of a cell that cannot run here ("unavailable").
        `memory_only`: the cell's record is its memory pass alone (memory_record)."""
        adapter, reason = cells.adapter_or_reason(cell["framework"])
        prov = self._provenance(cell, adapter)
        reason = reason or cells.unavailable_reason(cell, adapter, self.gpus)
        if reason:
            return results.new_record(cell, "unavailable", reason, prov)
        try:
            python, env_of = self._interpreter(cell, adapter, prov)
        except Unavailable as err:
            return results.new_record(cell, "unavailable", str(err), prov)
        o = self.options
        job = {
            "cell": cell,
            "seed": o.seed,
            "optimizer": cell.get("optimizer"),
            "lr": o.lr,
            "warmup": o.warmup,
            "repeat": o.repeat,
            "precision": o.precision,
            "time_budget_s": o.time_budget_s,
            "memory_limit": o.memory_limit,
            "predict": o.prediction,
            "matmul_precision": o.matmul_precision,
        }
        if o.leak_budgets_s:
            job["leak_budgets_s"] = list(o.leak_budgets_s)
        if cell["device"] != "cpu":  # one compile per cell: its passes share the framework's cache
            job["compile_cache_dir"] = f"{self.workdir}/{self._name('compile-cache-' + self._tag(cell))}"
            prov["matmul_precision"] = o.matmul_precision
        pinned = ({"framework": adapter.name, "version": cell["version"], "torch_index": o.torch_index}
                  if cell.get("version") else None)
        return CellState(index, cell, adapter, prov, job, memory_only=memory_only, python=python, env_of=env_of,
                         pinned=pinned)

    def _tag(self, cell):
        return f"{cell['workload']}-{cell['framework']}-{cell['mode']}-{cell['device']}"

    def memory_task(self, state):
        """The memory pass (needs the reference gradient: reference_task first)."""
        cell = state.cell
        if state.memory_only:
            ref_path, ref_note = None, MEMORY_ONLY
        else:
            ref_path, ref_note = self.reference.get(reference_key(cell), (None, "no reference gradient computed"))
        state.prov["reference_gradient"] = ref_note
        # when the cell's first pass is handed out (the plan is made for every cell at once)
        state.prov["started_at"] = origin.now_iso()
        env, recorded = self._environment(state.adapter, "memory")
        env, state.prov["env"] = state.env_of(env) if state.env_of else env, recorded
        job = dict(
            state.job,
            kind="memory",
            tracemalloc=state.adapter.arrays_are_numpy,
            reference_gradient_path=ref_path,
        )
        name = self._name(f"memory-{self._tag(cell)}")
        task = Task(
            job, env, name, self.options.timeout_s, sample_rss=True, tag=("memory", state),
            python=state.python, pinned=state.pinned,
        )
        if cell["device"] == "cuda":
            # alone until NVML is known to answer per process (cuda_sharing.py)
            self.cuda_sharing.made(task)
        state.memory_task = task
        return task

    def memory_done(self, state, outcome):
        """None when the time pass may follow, else the cell's (failed) record."""
        state.memory = outcome
        state.prov["finished_at"] = origin.now_iso()
        if state.cell["device"] == "cuda" and state.memory_task is not None:
            state.prov["cuda_concurrency"] = self.cuda_sharing.learned(state.memory_task, outcome)
        state.prov["worker_wall_s"] = {"memory": round(outcome.wall_s, 3)}
        _note_node(state.prov, outcome, "memory")
        if not outcome.ok:
            return results.new_record(state.cell, outcome.status, f"memory pass: {outcome.message}", state.prov)
        return None

    def memory_record(self, state, outcome):
        """The record of a memory-only cell (harness scale): its memory pass alone."""
        return self.memory_done(state, outcome) or self._record(state.cell, state.prov, outcome, None)

    def time_task(self, state):
        env, recorded = self._environment(state.adapter, "time")
        env, state.prov["time_env"] = state.env_of(env) if state.env_of else env, recorded
        name = self._name(f"time-{self._tag(state.cell)}")
        return Task(
            dict(state.job, kind="time"), env, name, self.options.timeout_s, gated=True, tag=("time", state),
            python=state.python, pinned=state.pinned,
            prefer_node=state.memory.node if state.memory is not None else None,
        )

    def time_done(self, state, outcome):
        """The cell's record."""
        state.prov["finished_at"] = origin.now_iso()
        state.prov["worker_wall_s"]["time"] = round(outcome.wall_s, 3)
        waited = _gate_wait_s(outcome)
        if waited is not None:  # part of the wall above; what the pass itself needs is the rest
            state.prov["gate_wait_s"] = {"time": waited}
        _note_node(state.prov, outcome, "time")
        if not outcome.ok:
            return results.new_record(state.cell, outcome.status, f"time pass: {outcome.message}", state.prov)
        return self._record(state.cell, state.prov, state.memory, outcome)

    def _interpreter(self, cell, adapter, prov):
        """(python, env -> env) of `cell`'s workers: this interpreter, or a pinned
        version's environment (built on first use; Unavailable when it cannot be)."""
        if not cell.get("version"):
            return None, lambda env: env
        found = envs.for_version(adapter, cell["version"], self.options.torch_index)
        prov["versions"] = {"gradmem": prov["versions"].get("gradmem"), **found.versions}
        prov["python"] = found.manifest.get("python", prov["python"])
        prov["framework_env"] = found.path
        return found.python, lambda env: code_link.worker_environment(env, self.workdir)

    def _record(self, cell, prov, memory, timing):
        m, t = memory.result, (timing.result if timing is not None else {})
        prov.update(
            {
                "settings": m.get("settings"),
                "load_s": {"memory": m.get("load_s"), "time": t.get("load_s")},
                # fork: the pass's worker was forked from a process that had imported the
                # framework (its load_s leaves the import out); spawn: a fresh interpreter
                "worker_start": {"memory": m.get("worker_start"), "time": t.get("worker_start")},
                "hwm_method": m.get("hwm_method"),
                "runtime_warmup": m.get("runtime_warmup"),
                "plan_s": {"memory": m.get("plan_s"), "time": t.get("plan_s")},
                "baseline_rss_bytes": m.get("baseline_rss_bytes"),
            }
        )
        if cell["framework"] == "reference" and m.get("order"):
            cell = dict(cell, order=m["order"])
        record = results.new_record(
            cell,
            "ok",
            provenance=prov,
            **{key: m.get(key) for key in results.MEMORY_PASS_FIELDS},
            **{key: t.get(key) for key in results.TIME_PASS_FIELDS},
            timeline=timeline.build(memory.sampler, memory.marks) if memory.sampler else None,
        )
        try:  # every ok record written follows the schema (footprint = retained + peak ...)
            return results.validate(record)
        except results.SchemaError as err:
            return results.new_record(cell, "error", f"harness bug, record not written as ok: {err}", prov)

    def _provenance(self, cell, adapter):
        settings = self.options.settings()
        prov = {
            "versions": origin.versions(adapter) if adapter else {},
            "git_commit": origin.git_commit(),
            "machine": origin.machine(),
            "python": origin.python(),
            "env": {},
            "threads": settings.pop("threads"),
            "seed": settings.pop("seed"),
            "started_at": origin.now_iso(),
        }
        prov.update(settings)  # warmup_steps, time_repeats (at least), ... memory_limit_bytes
        prov.update(
            time_rule="timed steps until the median's 90 % interval is within +-time_precision, or "
            "time_budget_s seconds of them are spent; median of the steps no other process disturbed "
            "(harness/measure/timing.py)",
            time_spread="interquartile range (75th - 25th percentile, linear interpolation)",
            peak_method=(
                "step peak = VmHWM - RSS at the step's start (peak_file_bytes: file pages at each phase's end "
                "above the step's start); retained_bytes = RSS at the step's start - baseline RSS (after gc + "
                "malloc_trim, before the first step), split by page kind in retained_detail_bytes (the figure "
                "retained is its anon + shmem pages, code pages its file pages); footprint = retained + step peak"
            ),
        )
        return prov


def _gate_wait_s(outcome):
    """Seconds a gated pass waited at its gate (its "ready" to "go" marks) for the
    machine to empty, or None (not gated, or a mark missing)."""
    marks = {name: t for t, name in (outcome.marks or ())}
    if "ready" in marks and "go" in marks:
        return round(max(0.0, marks["go"] - marks["ready"]), 3)
    return None


def _note_node(prov, outcome, kind):
    """A cluster executor names the node each pass ran on: the record's `machine` is
    that node's, `node` says which node (host, Ray node id, its gradmem commit). A time
    pass that ran on another node than the memory pass (its node was lost) adds
    `time_node` and `time_machine`: the times are that machine's."""
    node = getattr(outcome, "node", None)
    if not node:
        return
    node = dict(node)
    machine = node.pop("machine", None)
    if kind == "memory" or "node" not in prov:
        prov["node"], prov["machine"] = node, machine
    elif node.get("ray_node_id") != prov["node"].get("ray_node_id") or node.get("rerun_after"):
        prov["time_node"], prov["time_machine"] = node, machine
