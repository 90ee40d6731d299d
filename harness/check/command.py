"""`python -m harness check`: every framework's gradient against the reference engine's.

For every (workload, framework, mode, dtype) asked for, the framework computes the
loss and the gradient of the workload (at ``--size``, from the same seeded init) in a
worker process of its own (harness/check/framework_runner.py: started, timed out and stopped
as `harness run`'s workers are), and each parameter's gradient is compared with the
reference engine's float64 gradient at the same point:

    relative error = ||g - g_ref|| / ||g_ref||    (the loss too, as "(loss)")

A cell passes when the worst relative error is within the dtype's tolerance (the one
rule every reader uses, harness/measure/gradients.py: float64 1e-8, float32 1e-4) and
every gradient (and the loss) has the cell's dtype and the param's shape: a float32 run
must stay float32. A float32 cell is compared with the float64 gradient at its
float32-rounded params, so only the framework's float32 arithmetic is measured, not the
rounding of the inputs. Where a relu input lies within float32 rounding of zero, a run
may take the other side of the kink than float64 does: the truth is then also taken
there (harness/measure/kinks.py), a run that matches it agrees and the table names the
kink ("kink" beside its error, the units under the table).

Exit status: 0 when every cell that ran passed, 1 when one disagreed, failed or
crashed (or the reference could not run), 2 for an unknown name (cli.py). A framework
that is not installed, a mode it does not have, or a device it cannot use is listed
as skipped with the reason, and does not fail the check.
"""

import concurrent.futures
import functools
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from harness import cli_options, frameworks, interrupts, workloads
from harness.choices import DEVICES, DTYPES, MODES, SIZES, ChoiceError, check_choice, parse_choices
from harness.check import framework_runner
from harness.measure.gradients import TOLERANCE, agreement, relative_error, tolerance
from harness.measure.kinks import Truth

REFERENCE = "reference"


def add_arguments(parser):
    cli_options.add_axes(parser, workload="all", framework="all", size="tiny", dtype="float64,float32",
                         device="cpu", mode="eager,compiled", single=("size", "device"))
    parser.add_argument("--seed", type=int, default=0, help="seed of every workload's init (default 0)")
    cli_options.add_timeout(parser, 900.0, "seconds one cell may take, compilation included")
    parser.add_argument("--keep", metavar="DIR", help="keep the workers' files (gradients as .npz) in DIR")
    parser.add_argument("--jobs", type=int, default=1,
                        help="frameworks checked at once, each in its own worker (default 1; with more, the "
                        "table's first/steady times are taken side by side, so contended)")


@dataclass
class Row:
    workload: str
    framework: str
    mode: str
    dtype: str
    status: str  # ok, FAIL, error, crashed, timeout, unavailable, reference
    error: float = None  # worst relative error
    worst: str = ""  # the parameter (or "(loss)") with the worst error
    message: str = ""
    first_s: float = None
    steady_s: float = None
    kink: dict = None  # where the run agreed with the truth at a relu kink's other side (gradients.agreement)

    @property
    def failed(self):
        return self.status not in ("ok", "reference", "unavailable")


def _workload_rank(name):
    """Built-ins in their order, then external workloads by reference."""
    return (workloads.NAMES.index(name), "") if name in workloads.NAMES else (len(workloads.NAMES), name)


def main(args):
    size = check_choice("size", args.size, SIZES)
    names = workloads.parse(args.workload)  # built-in names, .py files, module:attr
    for name in names:
        if workloads.native(name) is not None:
            raise ChoiceError(f"{workloads.label(name)} is a native step: its gradient is its own code's, with no "
                              f"op-set gradient to compare (check compares op-set workloads); measure it with "
                              f"harness run")
    fw_names = parse_choices("framework", args.framework, frameworks.NAMES)
    dtypes = parse_choices("dtype", args.dtype, DTYPES)
    modes = parse_choices("mode", args.mode, MODES)
    device = check_choice("device", args.device, DEVICES)
    if args.jobs < 1:
        raise ChoiceError(f"--jobs must be at least 1, got {args.jobs}")

    start = time.perf_counter()
    check = functools.partial(run_check, names, fw_names, size, dtypes, modes, device, args.seed, args.timeout,
                              jobs=args.jobs)
    # A signal (SIGTERM, SIGHUP, Ctrl-C) kills every worker and exits 128 + its number,
    # as `harness run` does (harness/interrupts.py); the temporary directory goes.
    with interrupts.handling():
        try:
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                rows, skipped = check(args.keep)
            else:
                with tempfile.TemporaryDirectory(prefix="gradmem-check-") as out_dir:
                    rows, skipped = check(out_dir)
        except KeyboardInterrupt as stop:  # interrupts.Interrupted, or Ctrl-C where not handled
            name = getattr(stop, "signal_name", "SIGINT")
            print(f"interrupted by {name}: workers killed, temporary files removed", file=sys.stderr)
            return getattr(stop, "exit_code", 130)
    print(format_table(rows, skipped, size, device))
    failed = [r for r in rows if r.failed]
    ran = [r for r in rows if r.status != "unavailable"]
    print(f"\n{len(ran) - len(failed)} of {len(ran)} cells agree; {len(failed)} failed; "
          f"{len(skipped)} skipped. {time.perf_counter() - start:.0f} s.")
    return 1 if failed else 0


def plan(names, fw_names, size, dtypes, modes, seed, only=None):
    """({framework: [cell]}, [(framework, mode, reason)] skipped). The reference runs
    first, with the float64 "truth" cells every other cell is compared with. `only`
    ({framework: workloads}) narrows a framework to some of `names`, so that frameworks
    checked on different workloads share one run (and run `jobs` at a time)."""
    cells, skipped = {}, []
    for fw in dict.fromkeys([REFERENCE, *fw_names]):  # the reference always runs
        try:
            adapter = frameworks.get(fw)
        except ImportError as err:  # an adapter module that is missing or broken
            skipped.append((fw, "all", f"its adapter cannot be imported: {err}"))
            continue
        ok, reason = adapter.available()
        if not ok:
            skipped.append((fw, "all", reason))
            continue
        wanted = []
        fw_dtypes = [d for d in dtypes if d in adapter.dtypes]
        if fw != REFERENCE:
            skipped += [(fw, "all", adapter.dtype_reason(d)) for d in dtypes if d not in adapter.dtypes]
        for mode in modes:
            if mode not in adapter.modes:
                if fw in fw_names:
                    skipped.append((fw, mode, f"{fw} has no {mode} mode (modes: {', '.join(adapter.modes)})"))
                continue
            fw_workloads = [name for name in names if name in (only or {}).get(fw, names)]
            wanted += [(name, mode, dtype) for name in fw_workloads for dtype in fw_dtypes]
        if fw == REFERENCE:
            truth = [(name, "eager", dtype) for name in names for dtype in dtypes]
            cells[fw] = [_cell("truth", n, size, d, m, seed, upcast=True) for n, m, d in truth]
            if fw in fw_names:  # its own rows, except float64 eager: that is the truth
                cells[fw] += [_cell(fw, n, size, d, m, seed) for n, m, d in wanted if (m, d) != ("eager", "float64")]
        elif wanted:
            cells[fw] = [_cell(fw, n, size, d, m, seed) for n, m, d in wanted]
    return cells, skipped


def _cell(prefix, workload, size, dtype, mode, seed, upcast=False):
    # the id names a file: an external workload's reference holds "/" and "#"
    token = workload if workload in workloads.NAMES else workloads.label(workload) + "-" + workload[-6:]
    return {"id": f"{prefix}-{token}-{mode}-{dtype}", "workload": workload, "size": size,
            "dtype": dtype, "mode": mode, "seed": seed, "upcast": upcast}


def run_check(names, fw_names, size, dtypes, modes, device, seed, timeout_s, out_dir, jobs=1, only=None):
    """([Row], [(framework, mode, reason)]): every cell computed and compared; `jobs`
    frameworks at a time (each in its own worker process; they share nothing); `only`
    as in plan()."""
    cells, skipped = plan(names, fw_names, size, dtypes, modes, seed, only)
    if device != "cpu" and REFERENCE in fw_names:  # one worker runs the truth and its own rows
        print(f"  note: the reference engine's rows run on the CPU, like the truth they are checked "
              f"against: not a check of its {device} path (harness run --device {device} checks that)",
              file=sys.stderr, flush=True)

    def gradients(fw):
        # the truth is computed on the CPU: float64 NumPy, the same on every machine
        fw_device = "cpu" if fw == REFERENCE else device
        print(f"  {fw}: {len(cells[fw])} gradients ...", file=sys.stderr, flush=True)
        return fw, framework_runner.run_framework(fw, cells[fw], out_dir, fw_device, timeout_s)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = dict(pool.map(gradients, list(cells)))
    truth = {(c["workload"], c["dtype"]): results.get(REFERENCE, {}).get(c["id"])
             for c in cells.get(REFERENCE, []) if c["id"].startswith("truth-")}
    if REFERENCE not in cells:
        reason = next((r for f, _, r in skipped if f == REFERENCE), "")
        truth = {(n, d): framework_runner.CellResult("-", "unavailable", f"reference: {reason}") for n in names for d in dtypes}

    rows = []
    for fw, fw_cells in cells.items():
        for cell in fw_cells:
            if cell["upcast"]:
                if fw in fw_names and cell["dtype"] == "float64":
                    rows.append(_truth_row(cell, results[fw][cell["id"]]))
                continue
            ref = truth[(cell["workload"], cell["dtype"])]
            rows.append(_compare_row(cell, fw, results[fw][cell["id"]], ref))
    rows.sort(key=lambda r: (_workload_rank(r.workload), frameworks.NAMES.index(r.framework),
                             MODES.index(r.mode), -DTYPES.index(r.dtype)))  # float64 first
    return rows, skipped


def _truth_row(cell, result):
    status = "reference" if result.status == "ok" else result.status
    return Row(cell["workload"], REFERENCE, "eager", "float64", status, message=result.message,
               first_s=result.first_s, steady_s=result.steady_s)


def _compare_row(cell, fw, result, ref):
    row = Row(cell["workload"], fw, cell["mode"], cell["dtype"], result.status, message=result.message,
              first_s=result.first_s, steady_s=result.steady_s)
    if result.status != "ok":
        return row
    if ref is None or ref.status != "ok":
        row.status = "FAIL"
        row.message = f"no reference gradient to compare with ({ref.status if ref else 'missing'}: {ref.message if ref else ''})"
        return row
    shapes = param_shapes(cell["workload"], cell["size"], cell["seed"])
    error, worst, problems, row.kink = compare(result.loss, result.grads, ref.truth or Truth(ref.loss, ref.grads, 0, []),
                                               shapes, cell["dtype"])
    row.error, row.worst = error, worst
    if problems:
        row.status, row.message = "FAIL", "; ".join(problems)
    return row


@functools.lru_cache(maxsize=None)
def param_shapes(workload, size, seed):
    """{param: shape} of a workload at a size (what every gradient must match)."""
    params, _ = workloads.get(workload).init(np.random.default_rng(seed), workloads.config(workload, size), "float32")
    return {k: v.shape for k, v in params.items()}


def compare(loss, grads, truth, shapes, dtype):
    """(worst relative error, its name, [problems], kink or None) of a gradient against
    the truth (kinks.Truth: the reference's float64 gradient, and at a relu kink the
    gradient on its other side).

    A problem is anything that fails the cell: a missing or extra gradient, a wrong
    shape or dtype (float32 must stay float32), a non-finite value, an error above the
    dtype's tolerance."""
    problems, checked = [], {}
    if set(grads) != set(shapes):
        problems.append(f"gradient names {sorted(grads)} != params {sorted(shapes)}")
    for name, got in [("(loss)", None if loss is None else np.asarray(loss)), *sorted(grads.items())]:
        if got is None or (name != "(loss)" and name not in truth.grads):
            continue
        expected_shape = () if name == "(loss)" else shapes[name]
        if got.shape != expected_shape:
            problems.append(f"{name}: shape {got.shape}, expected {expected_shape}")
            continue
        if got.dtype != np.dtype(dtype):
            problems.append(f"{name}: dtype {got.dtype}, expected {dtype}")
        checked[name] = got
    found = agreement({k: v for k, v in checked.items() if k != "(loss)"}, truth, dtype)
    error, worst = found.error, found.worst
    if "(loss)" in checked and truth.loss is not None:
        loss_error = relative_error(checked["(loss)"], np.asarray(truth.loss))
        if not np.isnan(error) and (np.isnan(loss_error) or loss_error > error or not worst):
            error, worst = loss_error, "(loss)"
    if not worst:
        error = float("nan")
    if not np.isfinite(error) or error > tolerance(dtype):
        problems.append(f"{worst}: relative error {error:.2e} > {tolerance(dtype):.0e}")
    return error, worst, problems, found.kink


def format_table(rows, skipped, size, device):
    head = ("workload", "framework", "mode", "dtype", "status", "rel. error", "worst", "first s", "steady s")
    lines = [[r.workload, r.framework, r.mode, r.dtype, r.status,
              ("-" if r.error is None else f"{r.error:.1e}") + (" kink" if r.kink else ""), r.worst or "-",
              _seconds(r.first_s), _seconds(r.steady_s)] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    fmt = lambda cols: "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()
    out = [f"gradients at size {size} on {device} against the reference engine in float64 "
           f"(tolerance: float64 {TOLERANCE['float64']:.0e}, float32 {TOLERANCE['float32']:.0e})", "",
           fmt(head), fmt(["-" * w for w in widths])]
    out += [fmt(line) for line in lines]
    kinked = [r for r in rows if r.kink]
    if kinked:
        out += ["", "kink: agrees with the truth taken on the other side of a relu kink (harness/measure/kinks.py):"]
        out += [f"  {r.workload} {r.framework} {r.mode} {r.dtype}: {r.kink['units']} relu unit(s) within float32 "
                f"rounding of zero, {r.kink['flipped']}; against float64's side "
                f"{r.kink['float64_side_error']:.1e}" for r in kinked]
    notes = [r for r in rows if r.message]
    if notes:
        out += ["", "messages:"]
        out += [f"  {r.workload} {r.framework} {r.mode} {r.dtype} [{r.status}]: {_indent(r.message)}" for r in notes]
    if skipped:
        out += ["", "skipped:"]
        out += [f"  {fw} {'' if mode == 'all' else mode + ' '}: {reason}".replace(" :", ":") for fw, mode, reason in skipped]
    return "\n".join(out)


def _seconds(value):
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _indent(text):
    return text.strip().replace("\n", "\n      ")
