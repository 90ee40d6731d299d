"""The tables `harness scale` prints: the fitted lines, and the predictions."""

from harness.scale.series import PHASES, footprint_of, verdict
from harness.units import KIB, MIB

FIT_COLUMNS = ("cell", "line", "batches", "per sample KiB", "fixed MiB", "R²", "max resid KiB", "/bound")


def _num(value, fmt, scale=1):
    return "-" if value is None else format(value / scale, fmt)


def _grid(header, rows):
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) if i < 2 else str(cell).rjust(w) for i, (cell, w) in
                       enumerate(zip(row, widths))).rstrip() for row in [header] + rows]
    return "\n".join(lines[:1] + ["-" * len(lines[0])] + lines[1:])


def _line_row(label, name, line, bound_per_sample=None):
    batches = ",".join(str(b) for b, _ in line.points)
    ratio = None if not bound_per_sample else line.per_sample / bound_per_sample
    return [label, name, batches, _num(line.per_sample, ".1f", KIB), _num(line.fixed, ".2f", MIB),
            _num(line.r2, ".4f"), _num(line.max_residual, ".1f", KIB), _num(ratio, ".3f")]


def format_fits(fits):
    """One row per fitted line: the step peak of each phase, the footprint (first
    step or steady state, whichever is larger), and tracemalloc's total where taken."""
    rows, notes = [], []
    for fit in fits:
        label = fit.series.label
        for phase in PHASES:
            if phase in fit.peak:
                rows.append(_line_row(label, f"peak {phase}", fit.peak[phase], fit.bound_per_sample))
                label = ""
        if fit.footprint is not None:
            rows.append(_line_row(label, "footprint", fit.footprint))
            label = ""
        if "total" in fit.traced:
            rows.append(_line_row(label, "tracemalloc total", fit.traced["total"], fit.bound_per_sample))
        if not fit.ok:
            rows.append([fit.series.label, "no fit", "", "", "", "", "", ""])
        if fit.note:
            notes.append(f"  {fit.series.label}: {fit.note}")
    text = _grid(list(FIT_COLUMNS), rows)
    legend = (
        "peak = step peak above the bytes resident at the step's start, per phase (steady state); footprint = "
        "retained + step peak, the larger of the first and the steady step; bytes = fixed + per sample x batch "
        "by least squares; /bound = per sample / the workload's bound per sample"
    )
    return "\n".join([text, legend] + (["notes:"] + notes if notes else []))


def format_predictions(predictions, budget):
    """The largest batch whose footprint fits `budget`: the fit's prediction, each
    verification round (the prediction, and the footprint measured there and at
    1.25x), and the last round's verdict."""
    rows = []
    for p in predictions:
        fit = p["fit"]
        first = p["rounds"][0][0] if p["rounds"] else p["batch"]
        if first is None:
            rows.append([fit.series.label, "-", "-", "-", "-", p["error"]])
            continue
        shown = "; ".join(f"{batch}: " + " / ".join(_checked(r) for _, r in sorted(checks, key=lambda fc: fc[0]))
                          for batch, checks in p["rounds"])
        said = verdict(p["rounds"][-1][1], budget) if p["rounds"] else ""
        rows.append([fit.series.label, str(first), _num(fit.footprint.at(first), ".1f", MIB), shown or "-",
                     str(p["batch"]), said])
    header = ["cell", "fit's batch", "fit's MiB", "measured MiB (batch) per round", "largest batch", "verdict"]
    return f"largest batch whose footprint fits {budget / MIB:.0f} MiB:\n" + _grid(header, rows)


def _checked(record):
    if record.get("status") != "ok":
        return f"{record.get('status')} ({record['batch']})"
    return f"{footprint_of(record) / MIB:.1f} ({record['batch']})"
