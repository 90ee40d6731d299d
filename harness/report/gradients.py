"""The gradient-agreement table: each framework's gradient against the reference engine.

The figure is the record's `grad_rel_err`: max over parameters of
||g - g_ref|| / ||g_ref||, with g_ref from the reference engine in float64. The verdict
is the one rule `harness check` uses too (harness/measure/gradients.py): `agrees` within
the dtype's tolerance (float32 1e-4: a few hundred ulps after a chain of products;
float64 1e-8), `disagrees` beyond it, and `agrees at a relu kink` where a relu input
within float32 rounding of zero put the run on the other side of the kink than float64
and the run agrees with the truth taken there (the record's `grad_kink`; hover for the
units and the error against float64's side). A CUDA cell that disagrees says why where
the record knows: the precision its float32 matrix products ran at (--matmul-precision;
TF32 tensor cores keep 10 bits of mantissa, so errors of 1e-3 are what they compute, not a bug).
"""

from harness import figures, frameworks
from harness.measure.gradients import AT_KINK, tolerance, verdict
from harness.report.fmt import esc, human_error

#: the CSS class of each verdict
CSS = {"agrees": "agrees", AT_KINK: "kink", "disagrees": "disagrees"}


def _why(record, kind):
    kink = record.get("grad_kink") or {}
    if kind == AT_KINK:
        return (f"{kind}: {kink.get('units')} relu unit(s) within float32 rounding of zero, {kink.get('flipped')}; "
                f"against float64's side {human_error(kink.get('float64_side_error'))}")
    note = precision_note(record) if kind != "agrees" else ""
    return f"{kind}; {note}" if note else kind


def render(view):
    dtype = None
    head = "".join(f"<th>{esc(column)}</th>" for column in view["columns"])
    rows, any_value = [], False
    for workload in view["workloads"]:
        cells = []
        for column in view["columns"]:
            record = view["cells"].get((workload, column))
            error = figures.value(record, "grad_rel_err")
            if record is None:
                cells.append('<td class="absent">not run</td>')
            elif record.get("status") != "ok":
                cells.append(f'<td class="status-{esc(record.get("status"))}">{esc(record.get("status"))}</td>')
            elif error is None:
                why = record.get("grad_check") or ""
                cells.append(f'<td class="absent" title="{esc(why)}">not checked</td>')
            else:
                any_value = True
                dtype = record.get("dtype")
                kind = verdict(error, dtype, record.get("grad_kink"))
                why = _why(record, kind)
                mark = " kink" if kind == AT_KINK else " †" if why != kind else ""
                cells.append(f'<td class="grad-{CSS[kind]}" title="{esc(why)}">{esc(human_error(error))}'
                             f'{mark}</td>')
        rows.append(f'<tr><th class="workload">{esc(workload)}</th>{"".join(cells)}</tr>')
    if not any_value:
        return '<p class="none">No gradient was cross-checked in this view.</p>'
    return (
        '<table class="gradients"><thead><tr><th>relative gradient error</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="legend">max over parameters of ‖g − g_ref‖ / ‖g_ref‖ against the reference '
        f"engine in float64; agrees ≤ {tolerance(dtype):g} ({dtype}), disagrees beyond (the rule "
        "<code>harness check</code> applies too). kink: a relu input within float32 rounding of zero put "
        "the run on the other side of the kink than float64; its error is against the truth taken there "
        "(hover for the units). † hover: the matmul precision of a CUDA cell that disagrees.</p>"
    )


def precision_note(record):
    """What the cell's float32 matrix products ran at on a GPU, in words, or "" on the CPU;
    a record from before gradmem set it names its adapter's `gpu_matmul_default` (JAX: TF32)."""
    if (record.get("device") or "cpu") == "cpu":
        return ""
    set_to = ((record.get("provenance") or {}).get("settings") or {}).get("matmul_precision")
    if set_to:
        return f"matmul precision: {set_to}"
    name = record.get("framework")
    default = frameworks.get(name).gpu_matmul_default if name in frameworks.NAMES else ""
    if default:
        return f"matmul precision not set: {name}'s default on a GPU is {default}"
    return "matmul precision not recorded (the framework's default)"
