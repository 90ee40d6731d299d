"""The gradient-agreement table: each framework's gradient against the reference engine.

The figure is the record's `grad_rel_err`: max over parameters of
||g - g_ref|| / ||g_ref||, with g_ref from the reference engine in float64. A cell
is marked `agrees` within TOLERANCE for its dtype (a few hundred ulps of float32 after
a chain of products; float64 should agree to ~1e-12), `loose` within 100× that, and
`disagrees` beyond. A CUDA cell that is not `agrees` says why where the record knows:
the precision its float32 matrix products ran at (--matmul-precision; TF32 tensor cores
keep 10 bits of mantissa, so errors of 1e-3 are what they compute, not a bug).
"""

from harness import figures, frameworks
from harness.report.fmt import esc, human_error

TOLERANCE = {"float32": 1e-4, "float64": 1e-10}
LOOSE_FACTOR = 100


def verdict(error, dtype):
    tolerance = TOLERANCE.get(dtype, TOLERANCE["float32"])
    if error <= tolerance:
        return "agrees"
    if error <= tolerance * LOOSE_FACTOR:
        return "loose"
    return "disagrees"


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
                kind = verdict(error, dtype)
                why = f"{kind}; {precision_note(record)}" if kind != "agrees" and precision_note(record) else kind
                cells.append(f'<td class="grad-{kind}" title="{esc(why)}">{esc(human_error(error))}'
                             f'{" †" if why != kind else ""}</td>')
        rows.append(f'<tr><th class="workload">{esc(workload)}</th>{"".join(cells)}</tr>')
    if not any_value:
        return '<p class="none">No gradient was cross-checked in this view.</p>'
    tolerance = TOLERANCE.get(dtype, TOLERANCE["float32"])
    return (
        '<table class="gradients"><thead><tr><th>relative gradient error</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="legend">max over parameters of ‖g − g_ref‖ / ‖g_ref‖ against the reference '
        f"engine in float64; agrees ≤ {tolerance:g}, loose ≤ {tolerance * LOOSE_FACTOR:g}. "
        "† hover: the matmul precision of a loose CUDA cell.</p>"
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
