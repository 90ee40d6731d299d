"""One pass of one cell in a fresh process: ``python -m harness.measure.worker JOB RESULT``.

JOB is a JSON file written by the parent (harness/sweep/worker_process.py); RESULT is
where this process writes its JSON answer (atomically). The parent starts the interpreter
with the environment already set (malloc threshold, thread counts, the adapter's
`environment`), because several of those are read only at start-up.

Kinds of job:

- ``memory``: build; a framework's buffer cache off where it serves steps from one
  (MLX, tinygrad: `Adapter.buffer_cache_off`); settle, baseline; the cold first step,
  measured; the gradient
  check (outside every measured window); warm-up steps; the steady state, the median
  of 3 measured steps, each as retained (resident at its start above the baseline),
  step peak (above its start) and footprint (their sum); one unmeasured step with the
  adapter's counting hooks for the breakdown (harness/measure/breakdown.py); where the
  cache was off, two more steps with it on and the framework's count of what it holds
  (the record's ``buffer_cache``); then, for NumPy-based engines, one more step under
  tracemalloc; one more forward (and backward) listing which op made each saved
  activation (the record's ``saved_by_op``: harness/measure/saved_ops.py); last, the
  framework's own prediction of the step where it has one (the record's
  ``prediction``, harness/measure/prediction.py), after the result so far is written. Buffers a compiled step keeps for
  itself between calls (TinyJit's:
  `Adapter.step_held_bytes`) are counted in its step peak, not in retained.
- ``time``: the cold first step timed (`compile_s`: trace/compile/first-call costs),
  warm-up steps, then timed steps until the median is known well enough or the budget
  is spent (harness/measure/timing.py): median, minimum, IQR, CPU time per phase, and
  whether the time is noisy.
- ``reference_gradient``: the reference engine's float64 gradient of a problem, saved
  as .npz for the other cells' `grad_rel_err`.
- ``gradients``: `harness check`'s pass, one framework's cells, each one's loss and
  gradient saved as .npz and its result written atomically (harness/measure/gradients.py).

Every failure becomes a result with a status: a MemoryError (or an allocator's
out-of-memory message) is "oom", `Unavailable` is "unavailable", anything else "error"
with the traceback's tail. Deaths without a result (signals, timeouts) are classified
by the parent.
"""

import gc
import json
import os
import resource
import signal
import sys
import time

from harness.measure import failures
from harness.measure.marks import Marks


def main(argv=None, parent_pid=None):
    """parent_pid: the process whose death kills this one (default the job's: the
    sweep's; a worker forked by a zygote passes the zygote's, harness/sweep/zygote.py)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m harness.measure.worker JOB.json RESULT.json", file=sys.stderr)
        return 2
    job_path, result_path = argv
    with open(job_path, encoding="utf-8") as handle:
        job = json.load(handle)
    end_with_parent(parent_pid or job.get("parent_pid"))
    _limit_address_space(job.get("memory_limit"))  # first, before any framework import
    marks = Marks(job.get("marks_path"))
    marks.mark("start")
    job["result_path"] = result_path  # a pass may write what it has early (_prediction)
    try:
        result = KINDS[job["kind"]](job, marks)
    except BaseException as err:  # noqa: BLE001 - every failure must become a status
        if isinstance(err, KeyboardInterrupt):
            raise
        result = failures.from_exception(
            err,
            last_mark=marks.items[-1][1] if marks.items else None,
            memory_limited=bool(job.get("memory_limit")),
        )
    from harness.results import write_json_atomic

    write_json_atomic(result_path, result)
    _remove_own_compile_cache(job)
    marks.mark("exit")  # what follows is the interpreter's teardown (--schedule-log shows it)
    marks.close()
    return 0


def end_with_parent(parent_pid):
    """Die (SIGKILL) when the parent dies, even of SIGKILL: a parent killed that way
    cleans up nothing, and a hung worker would run forever (--timeout is enforced by the
    parent). Linux's PR_SET_PDEATHSIG; elsewhere, nothing. It fires when the parent's
    *thread* that started this worker ends: runner.run_worker waits in that thread."""
    if not parent_pid:
        return
    try:
        import ctypes

        if ctypes.CDLL(None).prctl(1, signal.SIGKILL) != 0:  # PR_SET_PDEATHSIG
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _limit_address_space(limit):
    """--memory-limit: RLIMIT_AS, so an allocation past it fails (MemoryError,
    std::bad_alloc, ENOMEM) in this process instead of the machine swapping."""
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))


# ---- shared set-up ---------------------------------------------------------------------
def _prepare(job, marks):
    """Load the framework and build the cell's step; returns (adapter, problem, step, info)."""
    from harness import frameworks, workloads
    from harness.frameworks.base import COMPILE_CACHE_ENV
    from harness.measure.phases import Step
    from harness.measure.runtime_warmup import DESCRIPTION, warm_runtime

    cell = job["cell"]
    t0 = time.perf_counter()
    adapter = frameworks.get(cell["framework"], **({"order": cell["order"]} if cell.get("order") else {}))
    remat = cell.get("remat") or "none"
    if cell["mode"] in adapter.own_compile_cache_modes:  # a cold compile in every process
        os.environ[COMPILE_CACHE_ENV] = _own_compile_cache(job)
    elif job.get("compile_cache_dir"):  # one compile per cell: its passes share the framework's cache
        os.environ[COMPILE_CACHE_ENV] = job["compile_cache_dir"]
    adapter.load(cell["device"], cell["mode"], remat=remat)
    precision = adapter.set_matmul_precision(cell["device"], job.get("matmul_precision") or "highest")
    warm_runtime(adapter, cell["device"], cell["mode"], cell["dtype"])
    load_s = time.perf_counter() - t0
    marks.mark("loaded")
    if workloads.native(cell["workload"]) is not None:  # the file's own step (harness/steps/runner.py)
        return _prepare_native(adapter, cell, load_s, precision)
    problem = workloads.build(cell["workload"], cell["size"], cell["dtype"], job["seed"], cell.get("batch"))
    params = adapter.from_numpy(problem.params, cell["device"])
    inputs = adapter.from_numpy(problem.inputs, cell["device"])
    adapter.sync(params)
    adapter.sync(inputs)
    problem.params = problem.inputs = None  # the framework's arrays are what steps use
    plan_s = None
    if hasattr(adapter, "prepare"):  # e.g. the reference engine's articulation plan: a
        t0 = time.perf_counter()  # dry trace, before the baseline like a compile
        adapter.prepare(problem.loss, params, inputs, name=f"{problem.name} at {problem.size}")
        plan_s = time.perf_counter() - t0
        marks.mark("planned")
    step = Step(adapter, problem.loss, params, inputs, cell["mode"], job.get("optimizer"), job.get("lr", 1e-3))
    info = {
        "load_s": load_s,  # import (unless forked), configuration and the runtime warm-up
        # spawn: a fresh interpreter imported the framework; fork: forked from a process
        # that had imported it (harness/sweep/zygote.py)
        "worker_start": os.environ.get("GRADMEM_WORKER_START", "spawn"),
        "runtime_warmup": DESCRIPTION,
        "plan_s": plan_s,
        "settings": _jsonable(dict(adapter.settings(), matmul_precision=precision)),
        "step_kind": step.kind,
        "step_program": adapter.step_program(cell["mode"], step.kind == "split"),
        "order": getattr(adapter, "order", None),
    }
    return adapter, problem, step, info


def _prepare_native(adapter, cell, load_s, precision):
    """_prepare's answer for a native step: its setup(cfg) run before the baseline."""
    from harness.measure.runtime_warmup import DESCRIPTION
    from harness.steps import runner

    problem, step = runner.build(adapter, cell)
    info = {"load_s": load_s, "worker_start": os.environ.get("GRADMEM_WORKER_START", "spawn"),
            "runtime_warmup": DESCRIPTION, "plan_s": None,
            "settings": _jsonable(dict(adapter.settings(), matmul_precision=precision)),
            "step_kind": step.kind, "step_program": step.program(), "order": None}
    return adapter, problem, step, info


def _native():
    from harness.steps import runner

    return runner


def _native_breakdown():
    from harness.steps import breakdown

    return breakdown


def _own_compile_cache(job):
    """A new, empty directory for this process's compile cache, beside its result file
    (in the sweep's work directory, so a killed worker's is removed with it); main()
    removes it when the pass ends."""
    import tempfile

    result_path = job.get("result_path")
    path = tempfile.mkdtemp(prefix="compile-cache-", dir=os.path.dirname(result_path) if result_path else None)
    job["own_compile_cache"] = path
    return path


def _remove_own_compile_cache(job):
    import shutil

    if job.get("own_compile_cache"):
        shutil.rmtree(job["own_compile_cache"], ignore_errors=True)


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


# ---- the memory pass ---------------------------------------------------------------------
def memory_pass(job, marks):
    from harness import results
    from harness.measure import breakdown, leak, probes  # noqa: F401 - leak: imported before the baseline
    from harness.measure.cuda import DeviceMeter
    from harness.measure.memory_meter import MemoryMeter, median_step
    from harness.measure.phases import NullMeter, settle_and_reset

    pass_started = time.monotonic()
    adapter, problem, step, info = _prepare(job, marks)
    cell = job["cell"]
    device = DeviceMeter.for_adapter(adapter, cell["device"])
    rss = probes.RssProbe()
    meter = MemoryMeter(rss, marks, device)
    runs = _count_runs(step)
    # the framework's own memory at each steady step's settled start: the first readings of
    # the leak phase, which goes on from them (leak.py)
    own_memory, own_log = _own_memory_reader(device), []
    # A framework that serves steps from freed buffers it keeps (MLX, tinygrad) is
    # measured with that cache off, so the step peak is what a step needs, as in every
    # other row; what the cache holds is counted after the measured steps.
    cache_off = adapter.buffer_cache_off()

    probes.settle()
    marks.mark("baseline")
    baseline = rss.set_baseline()
    if device is not None:
        device.set_baseline()

    meter.start("first:")
    grads = step.run(meter, keep_grads=True)
    first = meter.figures()
    first_device = device.figures() if device is not None else None

    # Outside every measured window: the reference gradient is read, compared, freed.
    check = (_grad_check(adapter, grads, job.get("reference_gradient_path"), cell["dtype"])
             if step.kind != "native" else {"note": _native().GRAD_CHECK})
    del grads

    for _ in range(job.get("warmup", 1)):
        settle_and_reset(rss)
        marks.mark("warm-up")
        step.run(NullMeter())

    # The steady state: the median of a few measured steps. Each step's peak is taken
    # above the resident bytes at its own start, and what is resident then above the
    # baseline is its retained figure. One step is enough for synchronous engines
    # (3 runs agree within 0.25 %), but JAX's async dispatch frees buffers when its
    # runtime gets to them, so its peak moves from step to step with how far Python runs
    # ahead of XLA: +-1.5 % on a quiet machine, up to 10 % under load (tiny_nerf small
    # 23.4-25.8 MiB over 12 steps, 23.6-23.8 with async dispatch off: docs/measurement.md).
    samples, steady_started = [], time.monotonic()
    for index in range(job.get("memory_steps", 3)):
        settle_and_reset(rss)
        own_log.append((runs[0], own_memory()))
        meter.start("" if index == 0 else f"steady{index}:")
        step.run(meter)
        samples.append(meter.figures())
        if device is not None:
            samples[-1]["device"] = device.figures()
    # Memory that grows every step: more steps, going on from the steady ones (leak.py)
    step_s = (time.monotonic() - steady_started) / max(len(samples), 1)  # a steady step, settling included
    leak_found = _leak(job, step, runs, own_memory, own_log, step_s, time.monotonic() - pass_started, marks) \
        if job.get("leak", True) else None
    held = adapter.step_held_bytes()
    device_samples = [sample.pop("device", None) for sample in samples]
    if held is not None:  # buffers a compiled step keeps for itself (TinyJit): its own,
        # held where the step runs: in the device's figures on CUDA, the host's on the CPU
        if device is not None:
            device_samples = [_count_held_in_step(sample, *held[:2]) for sample in device_samples]
        else:
            samples = [_count_held_in_step(sample, *held[:2]) for sample in samples]
    steady = median_step(samples)  # the host's figures: the median step by RSS
    device_memory = None
    if device is not None:  # the device's: the median step by the allocator, on its own
        device_memory = dict(median_step(device_samples), first_step=first_device)
        device.close()
        if not device.resettable and job.get("step_alone", True):
            device_memory = _step_alone(job, device_memory)

    # Where the bytes go: one more step with the adapter's counting hooks, unmeasured.
    settle_and_reset(rss)
    marks.mark("breakdown")
    as_record = {"status": "ok", "device": cell["device"], **steady, "device_memory": device_memory}
    counted = _native_breakdown().count(adapter, step) if step.kind == "native" else breakdown.count(adapter, step)
    breakdown_bytes, breakdown_method = breakdown.assemble(counted, as_record)
    buffer_cache = _buffer_cache(adapter, step, cache_off, held) if cache_off else None

    traced = None
    if job.get("tracemalloc"):
        traced = _traced_step(step, rss)

    measured = {
        **steady,
        **{results.first_step(field): first[field] for field in results.STEP_FIELDS},
        "steady_samples": [{k: s[k] for k in SAMPLE_FIELDS} for s in samples],
        "breakdown_bytes": breakdown_bytes,
        "breakdown_method": breakdown_method,
        "saved_by_op": _saved_by_op(adapter, step, rss, marks),
        "buffer_cache": buffer_cache,
        "prediction": None,
        "leak": leak_found,
        "bound_bytes": problem.bound_bytes,
        "bound_source": problem.bound_source,  # declared, or derived (harness/workloads/derived_bound.py)
        "tracemalloc_peak_bytes": traced,
        "device_memory": device_memory,
        "grad_rel_err": check.get("grad_rel_err"),
        "grad_check": check.get("note"),
        "grad_kink": check.get("kink"),
        **info,
    }
    # the record's fields, from the one list (results.MEMORY_PASS_FIELDS: a field this
    # pass does not give fails here, not silently in the sweep), and what the pass says of itself
    result = {"status": "ok", **{field: measured[field] for field in results.MEMORY_PASS_FIELDS},
              **{key: measured[key] for key in PASS_NOTES}, "baseline_rss_bytes": baseline, "hwm_method": rss.method}
    if job.get("predict", True):
        result["prediction"] = _prediction(job, result, adapter, problem, step, marks)
    return result


def _count_runs(step):
    """[steps run so far] kept up to date by `step`'s every run (the leak phase places its
    readings by the step; the breakdown's and the other passes' steps count too)."""
    runs, run = [0], step.run

    def counted(*args, **kwargs):
        runs[0] += 1
        return run(*args, **kwargs)

    step.run = counted
    return runs


def _own_memory_reader(device):
    """() -> the framework's own memory now: on CUDA its allocator's allocated bytes, on
    the host its anonymous and shared-memory pages (what `retained` counts)."""
    from harness.measure import probes

    if device is not None:
        def read():
            return device.probe.current_bytes()
        read.source = "the device allocator's allocated bytes"
        return read

    def read():
        status = probes.status_bytes()
        return status.get("RssAnon", 0) + status.get("RssShmem", 0)
    read.source = "the host's own pages (RssAnon + RssShmem)"
    return read


def _leak(job, step, runs, own_memory, own_log, step_s, pass_wall_s, marks):
    """Memory that grows every step (harness/measure/leak.py): the readings of the steady
    steps' starts (`own_log`), then more steps as the steady ones ran (each after gc +
    malloc_trim), the framework's own memory read at each one's start, within a budget of
    the pass's own wall so far. A step that raises MemoryError (a --memory-limit), or
    growth past leak.GROWTH_CAP_BYTES, ends the phase saying so, the figures kept."""
    # imported by memory_pass before its baseline: a module first imported here would read
    # as growth between the steady steps' readings and this phase's (about 100 KiB)
    from harness.measure import leak, probes
    from harness.measure.phases import NullMeter

    marks.mark("leak")
    budgets = tuple(job.get("leak_budgets_s") or leak.budgets(pass_wall_s))
    found = leak.run(lambda: step.run(NullMeter()), own_memory, probes.settle, first_step=runs[0], prior=own_log,
                     step_s=step_s, short=job.get("leak_short", leak.SHORT), long=job.get("leak_long", leak.LONG),
                     budgets_s=budgets)
    return dict(found, source=own_memory.source)


def _step_alone(job, device_memory):
    """The steady step's device figures from a fresh process, for an allocator whose
    peak cannot be reset (JAX): this pass compiled the step into the cell's compile
    cache, so the fresh process loads the executables (no compile, no autotuning) and
    its one measured step is the first thing to raise the process's peak: exact where
    `peak_exact` says so. The in-process figures stay beside it (`in_process`)."""
    import subprocess
    import tempfile

    from harness.measure.memory_meter import footprint

    with tempfile.TemporaryDirectory(prefix="gradmem-step-alone-") as tmp:
        child = dict(job, kind="device_step", result_path=None, marks_path=None, parent_pid=os.getpid())
        job_path, result_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
        with open(job_path, "w", encoding="utf-8") as handle:
            json.dump(child, handle)
        t0 = time.perf_counter()
        try:
            subprocess.run([sys.executable, "-m", "harness.measure.worker", job_path, result_path],
                           timeout=job.get("step_alone_timeout", 300), check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            with open(result_path, encoding="utf-8") as handle:
                alone = json.load(handle)
        except (OSError, ValueError, subprocess.TimeoutExpired) as err:
            alone = {"status": "error", "message": f"{type(err).__name__}: {err}"}
        wall = round(time.perf_counter() - t0, 3)
    in_process = {k: device_memory.get(k) for k in ("peak_bytes", "footprint_bytes", "peak_exact")}
    if alone.get("status") != "ok":
        device_memory["step_alone"] = {"status": alone.get("status"), "message": alone.get("message", "")[-500:],
                                       "wall_s": wall}
        return device_memory
    figures = alone["device_memory"]
    retained = device_memory.get("retained_bytes") or 0
    return dict(
        device_memory,
        peak_bytes=figures["peak_bytes"],
        footprint_bytes=footprint(retained, figures["peak_bytes"]),
        peak_exact=figures["peak_exact"],
        in_process=in_process,
        step_alone={"status": "ok", "wall_s": wall, "nvml_peak_bytes": figures.get("nvml_peak_bytes"),
                    "method": "the steady step measured again in a fresh process that loaded the step's "
                    "executables from this cell's compile cache (no compile, no autotuning), its one step "
                    "the first to raise the process's peak; retained is the in-process figure"},
        upper_bound_reason=None if all((figures["peak_exact"] or {}).values()) else (
            "the step measured alone did not raise the process's peak above what its set-up allocated"),
    )


def device_step(job, marks):
    """`_step_alone`'s child: build, baseline, one measured step, its device figures."""
    from harness.measure import probes
    from harness.measure.cuda import DeviceMeter
    from harness.measure.memory_meter import MemoryMeter
    from harness.measure.phases import settle_and_reset

    adapter, problem, step, info = _prepare(job, marks)
    device = DeviceMeter.for_adapter(adapter, job["cell"]["device"])
    rss = probes.RssProbe()
    meter = MemoryMeter(rss, marks, device)
    probes.settle()
    rss.set_baseline()
    device.set_baseline()
    settle_and_reset(rss)
    meter.start("alone:")
    step.run(meter)
    figures = device.figures()
    device.close()
    return {"status": "ok", "device_memory": figures, **info}


def _prediction(job, result, adapter, problem, step, marks):
    """The framework's own prediction of the step (harness/measure/prediction.py), taken
    last, after every measured figure. A predictor can kill the process (TensorFlow
    2.17's XLA compile dies of SIGILL on this CPU), so what was measured is written first,
    saying so: if the worker dies now, the parent reads that result, not a crash."""
    if step.kind == "native":  # the file's own code: no loss function to hand the predictor
        return dict(_native().PREDICTION)
    from harness.measure import prediction
    from harness.results import write_json_atomic

    if job.get("result_path"):
        died = {"state": "failed", "reason": "the worker died while the framework predicted (its predictor "
                "crashed the process; every measured figure was taken before)"}
        write_json_atomic(job["result_path"], dict(result, prediction=died))
    marks.mark("prediction")
    return prediction.take(adapter, problem.loss, step.params, step.inputs, job["cell"]["mode"])


def _saved_by_op(adapter, step, rss, marks):
    """Which op made each saved activation (harness/measure/saved_ops.py): one more
    forward and backward, after every measured figure, like the breakdown's."""
    if step.kind == "native":  # no op-set forward to list: the breakdown's saved activations stand
        return dict(_native().SAVED_BY_OP)
    from harness.measure import saved_ops
    from harness.measure.phases import settle_and_reset

    settle_and_reset(rss)
    marks.mark("saved-by-op")
    return saved_ops.measure(adapter, step)


#: the figures of one measured step kept per sample (the record's steady_samples)
SAMPLE_FIELDS = ("retained_bytes", "retained_detail_bytes", "peak_bytes", "peak_file_bytes", "footprint_bytes")
#: what a memory pass says of itself beside the record's fields (_prepare's info)
PASS_NOTES = ("load_s", "worker_start", "runtime_warmup", "plan_s", "settings", "order")


def _count_held_in_step(sample, held_bytes, kind):
    """A measured step's figures with the buffers its compiled program keeps for itself
    (resident at the step's start, so RSS filed them under retained) moved into every
    phase's step peak; the footprint is unchanged."""
    sample = {**sample, "peak_bytes": {k: v + held_bytes for k, v in sample["peak_bytes"].items()}}
    sample["retained_bytes"] -= held_bytes
    detail = dict(sample.get("retained_detail_bytes") or {})
    if detail:
        detail[kind] = detail.get(kind, 0) - held_bytes
        sample["retained_detail_bytes"] = detail
    return sample


def _buffer_cache(adapter, step, cache_off, step_held):
    """What the buffer cache (and a compiled step's kept buffers) hold between steps when
    the framework runs as its users run it: the cache turned on again, two unmeasured
    steps, then the framework's own count. Measured after every measured figure."""
    from harness.measure.phases import NullMeter

    adapter.buffer_cache_on()
    for _ in range(2):
        step.run(NullMeter())
    held, method = adapter.buffer_cache_bytes()
    found = {
        "memory_pass": cache_off,
        "held_bytes": int(held),
        "held_method": f"{method}, after two steps with the cache on (after the measured steps)",
    }
    if step_held is not None:  # counted in the step peak, not in retained
        held_bytes, _, held_method = step_held
        found.update(step_held_bytes=int(held_bytes), step_held_method=held_method)
    return found


def _traced_step(step, rss):
    """One more step with tracemalloc on (its bookkeeping would inflate the RSS figures,
    so it never runs during the RSS-measured steps)."""
    from harness.measure import probes
    from harness.measure.marks import Marks
    from harness.measure.memory_meter import MemoryMeter

    probes.settle()
    tracer = probes.TracemallocProbe()
    tracer.start()
    try:
        meter = MemoryMeter(rss, Marks(), tracemalloc=tracer)
        meter.start("traced:")
        step.run(meter)
        return meter.traced_figures()
    finally:
        tracer.stop()


def _grad_check(adapter, grads, reference_path, dtype):
    """{"grad_rel_err": max over params of ||g - g_ref|| / ||g_ref|| (float64 norms:
    gradients.relative_error, the error `harness check` reports), "kink": where the
    run agreed with the truth on the other side of a relu kink (gradients.agreement)}."""
    if not reference_path:
        return {"note": "no reference gradient for this cell"}
    if not os.path.exists(reference_path):
        return {"note": f"reference gradient missing: {reference_path}"}
    import numpy as np

    from harness.measure.gradients import agreement
    from harness.measure.kinks import load_truth

    got = adapter.to_numpy(grads)
    truth = load_truth(reference_path)
    if set(truth.grads) != set(got):
        return {"note": f"gradient keys {sorted(got)} != reference keys {sorted(truth.grads)}"}
    for name, ref in truth.grads.items():
        if np.asarray(got[name]).shape != ref.shape:
            return {"note": f"gradient {name!r} has shape {np.asarray(got[name]).shape}, reference {ref.shape}"}
    found = agreement({k: np.asarray(v) for k, v in got.items()}, truth, dtype)
    if found.error != found.error:  # NaN: not finite
        return {"note": f"gradient {found.worst!r} is not finite"}
    return {"grad_rel_err": found.error, "kink": found.kink,
            "note": f"agrees at a relu kink: {found.kink['flipped']}" if found.kink else None}


# ---- the time pass -----------------------------------------------------------------------
def time_pass(job, marks):
    from harness.measure.phases import NullMeter, TimeMeter
    from harness.measure.timing import Policy, Repeats

    _, _, step, info = _prepare(job, marks)
    if job.get("gated"):
        # Set up (imports, runtime warm-up, inputs) while other passes may run; what is
        # timed from here on runs when the parent says the machine is ours alone.
        marks.mark("ready")
        if not sys.stdin.buffer.readline():
            return {"status": "error", "message": "the parent closed the gate without releasing it (cancelled)"}
        marks.mark("go")
    first = TimeMeter()
    marks.mark("first-step")
    step.run(first)
    for _ in range(job.get("warmup", 1)):
        marks.mark("warm-up")
        step.run(NullMeter())
    # Each timed step follows a gc.collect() (timing.py), outside the clock. A full
    # collection walks every object the process holds: 0.1 s with torch imported, 0.3 s
    # with TensorFlow, more than many of their steps, so it was most of a cell's time
    # budget. What exists now (the framework, the model, its inputs) is frozen out of
    # collections (gc.freeze: it stays, it is only not walked again); the collections
    # between steps then see only what the steps make, which is what they are for.
    gc.collect()
    gc.freeze()
    marks.mark("timed")

    def step_once():
        meter = TimeMeter()
        step.run(meter)
        return meter

    repeats = Repeats(Policy.from_job(job)).run(step_once)
    fold = ("gradient",)  # the joint phase only feeds total
    return {
        "status": "ok",
        **repeats.summary(fold),
        "compile_s": first.samples["total"][0],
        "first_step_time_s": {k: v[0] for k, v in first.samples.items() if k not in fold},
        **info,
    }


# ---- the reference gradient ----------------------------------------------------------------
def reference_gradient(job, marks):
    import numpy as np

    from harness import frameworks, workloads
    from harness.measure import kinks

    cell = job["cell"]
    problem = workloads.build(cell["workload"], cell["size"], cell["dtype"], job["seed"], cell.get("batch"))

    def float64(tree):  # the cell's own values, computed in float64
        return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in tree.items()}

    adapter = frameworks.get("reference")
    adapter.load("cpu", "eager")
    # the truth, and where a relu input lies within float32 rounding of zero its other side too
    loss, grads, kink = kinks.reference_with_kink(adapter, problem.loss, adapter.from_numpy(float64(problem.params)),
                                                  adapter.from_numpy(float64(problem.inputs)))
    kink = kink and kink._replace(candidates=[(n, adapter.to_numpy(g)) for n, g in kink.candidates])
    with open(job["out_path"], "wb") as handle:
        kinks.save_truth(handle, adapter.to_numpy(loss), adapter.to_numpy(grads), kink)
    return {"status": "ok", "path": job["out_path"]}


def gradients(job, marks):
    from harness.measure.gradients import gradients_pass

    return gradients_pass(job, marks)


KINDS = {"memory": memory_pass, "time": time_pass, "device_step": device_step,
         "reference_gradient": reference_gradient, "gradients": gradients}


def exit_now(code):
    """Leave without the interpreter's teardown: the result is written and the marks are
    closed, and tearing down a framework costs seconds (a worker's exit with the teardown:
    TensorFlow 5.8 s, torch 2.6 s, PyTensor 1.8 s, JAX 1.6 s, NumPy 0.2 s; 0.02-0.2 s with
    os._exit: docs/measurement.md, "How a sweep is scheduled"), twice per cell. Nothing a
    framework does at exit matters to a result that is already on disk."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
