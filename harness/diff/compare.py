"""The difference between two records, as data (the text, JSON and page all read it).

- ``figures``: per phase, each figure of A and B and B - A that the registry lists for
  diff (harness/figures.py, DIFF): step peak, footprint, first step peak, time; then the
  whole-step ones: retained (the framework's own pages), code pages, the whole RSS;
- ``explained``: the step peak's difference split into the breakdown's categories
  (saved activations, gradients; harness/measure/breakdown.py), and the rest said
  as *not explained by a counted category* (the breakdown's temporaries: cotangents,
  kernel buffers, allocator slack), never forced to zero; the retained difference
  likewise against optimizer state. A category counted by different methods in A and
  B (TensorFlow's saved activations are RSS, torch's its hooks) says so;
- ``saved_by_op``: the ops whose saved bytes differ most (harness/measure/saved_ops.py);
- ``backward``: where both records have it (reference engine), what was live at
  the backward's highest point by role;
- ``environment``: what differs between the two runs that can move memory: versions,
  allocator and thread settings, worker start, machine, commit;
- ``layer``: where both records carry a prediction (record["prediction"]), whether
  the plan, the runtime or what is kept between steps changed.
"""

from harness import figures as registry
from harness.results import PHASES

#: a figure "moved" when it changed by more than this fraction and this many bytes:
#: steady steps repeat within 0.25 % (1.5 % for JAX's async frees; measurement.md),
#: and RSS counts 4 KiB pages
MOVED_FRACTION = 0.02
MOVED_BYTES = 64 * 1024
#: a prediction is a compiler's plan, the same on every run: beyond this it moved
PREDICTION_MOVED_FRACTION = 0.005

STEP_CATEGORIES = ("saved_activations", "gradients")
UNEXPLAINED = "not explained by a counted category"


def _sub(a, b):
    return b - a if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None


def _row(name, a, b, unit="bytes"):
    return {"figure": name, "a": a, "b": b, "diff": _sub(a, b), "unit": unit}


def figures(a, b):
    """Each figure `diff` lists (the registry's DIFF figures: a CUDA cell's memory figures
    are its device allocator's) of A and B: the phased ones phase by phase, then the
    whole-step ones (phase "step"); a figure neither record has is left out."""
    phased, whole = [], []
    for figure in registry.listed(registry.DIFF):
        va, vb = registry.value(a, figure.name), registry.value(b, figure.name)
        if va is None and vb is None:
            continue
        unit = "s" if figure.unit == "seconds" else "bytes"
        row = _row(registry.get(figure.base).label, va, vb, unit)
        if unit == "s":  # a time taken while other processes ran is advisory (time_noise says why)
            row.update(noisy_a=bool(a.get("time_noisy")), noisy_b=bool(b.get("time_noisy")))
        is_phased = figure.phase or registry.FIGURES.get(f"{figure.name}.forward")
        (phased if is_phased else whole).append(dict(row, phase=figure.phase or ("total" if is_phased else "step")))
    return sorted(phased, key=lambda r: PHASES.index(r["phase"])) + whole


def _category(a, b, name):
    ba, bb = a.get("breakdown_bytes") or {}, b.get("breakdown_bytes") or {}
    ma, mb = (a.get("breakdown_method") or {}).get(name), (b.get("breakdown_method") or {}).get(name)
    row = _row(name.replace("_", " "), ba.get(name), bb.get(name))
    row["method_a"], row["method_b"] = ma, mb
    row["same_method"] = ma == mb
    return row


def explained(a, b):
    """The step peak's and the retained bytes' differences split into categories."""
    peak = _row("step peak", registry.value(a, "step_peak"), registry.value(b, "step_peak"))
    parts = [_category(a, b, name) for name in STEP_CATEGORIES]
    # a category null on either side is not counted: its bytes stay in the rest, and
    # the rest says so (never a guess, never forced to zero)
    uncounted = [p["figure"] for p in parts if p["diff"] is None]
    rest = None
    if peak["diff"] is not None:
        rest = peak["diff"] - sum(p["diff"] for p in parts if p["diff"] is not None)
    temporaries = _category(a, b, "temporaries")
    retained = _row("retained", registry.value(a, "retained"), registry.value(b, "retained"))
    optimizer = _category(a, b, "optimizer_state")
    retained_rest = _sub(optimizer["diff"], retained["diff"]) if optimizer["diff"] is not None else None
    return {
        "step_peak": peak,
        "categories": parts,
        "unexplained": {
            "figure": UNEXPLAINED, "diff": rest, "uncounted": uncounted,
            "note": ("step peak difference - the counted categories' differences: the backward's cotangents, "
                     "kernel buffers, allocator slack, and whatever a category's method misses "
                     "(the breakdown's temporaries, when that is not clipped at 0)"
                     + (f"; includes {', '.join(uncounted)}, not counted in A or B" if uncounted else "")),
        },
        "temporaries": temporaries,
        "retained": retained,
        "retained_categories": [optimizer],
        "retained_unexplained": {"figure": UNEXPLAINED, "diff": retained_rest,
                                 "note": "retained difference - optimizer state difference"},
        "params_inputs": [_category(a, b, "params"), _category(a, b, "inputs")],
    }


def saved_by_op(a, b, top=None):
    """{a, b: the records' saved_by_op summaries; rows: op, bytes and count on each
    side, diff, biggest |diff| first}."""
    sa, sb = a.get("saved_by_op") or {}, b.get("saved_by_op") or {}
    oa, ob = sa.get("ops"), sb.get("ops")
    rows = []
    if oa is not None or ob is not None:
        for op in set(oa or {}) | set(ob or {}):
            ra, rb = (oa or {}).get(op) or {}, (ob or {}).get(op) or {}
            rows.append({
                "op": op,
                "a": ra.get("bytes", 0 if oa is not None else None), "b": rb.get("bytes", 0 if ob is not None else None),
                "count_a": ra.get("count", 0), "count_b": rb.get("count", 0),
                "names_a": ra.get("names", []), "names_b": rb.get("names", []),
                "in_op_set": ra.get("in_op_set", rb.get("in_op_set")),
            })
        for row in rows:
            row["diff"] = _sub(row["a"], row["b"])
        rows.sort(key=lambda r: (-abs(r["diff"] if r["diff"] is not None else max(r["a"] or 0, r["b"] or 0)), r["op"]))
    summary = {side: {"bytes": s.get("bytes"), "saved_activations_bytes": s.get("saved_activations_bytes"),
                      "method": s.get("method"), "has_ops": s.get("ops") is not None, "present": bool(s)}
               for side, s in (("a", sa), ("b", sb))}
    return {**summary, "rows": rows[:top] if top else rows}


def backward(a, b):
    """What each record says about its backward (saved_by_op["backward"]): the reference
    engine's bytes by role (live at the highest point, allocated), side by side where
    both have them; TensorFlow's tape aggregation (how many gradients one add_n summed),
    per side."""
    pa = (a.get("saved_by_op") or {}).get("backward")
    pb = (b.get("saved_by_op") or {}).get("backward")
    if pa is None and pb is None:
        return None
    found = {"note": "the backward of one more step, by what made each buffer (the engine's ledger: exact "
                     "bytes, not RSS)"}
    for part in ("at_peak", "allocated"):
        if not (pa or {}).get(part) or not (pb or {}).get(part):
            continue
        ra, rb = pa[part], pb[part]
        rows = [_row(role, ra.get(role, 0), rb.get(role, 0)) for role in set(ra) | set(rb)]
        rows.sort(key=lambda r: (-abs(r["diff"]), r["figure"]))
        found[part] = {"rows": rows, "total": _row("total", sum(ra.values()), sum(rb.values())),
                       "grew_most": rows[0]["figure"] if rows and rows[0]["diff"] > 0 else None}
    found["aggregation"] = {side: (p or {}).get("aggregation") for side, p in (("a", pa), ("b", pb))}
    found["errors"] = {side: (p or {}).get("error") for side, p in (("a", pa), ("b", pb))}
    return found


#: provenance keys whose difference can move a memory figure
ENVIRONMENT_KEYS = (
    ("versions", "versions"),
    ("env", "memory pass environment (allocator, threads)"),
    ("threads", "threads"),
    ("settings", "framework settings"),
    ("worker_start", "worker start"),
    ("python", "python"),
    ("hwm_method", "peak method"),
    ("runtime_warmup", "runtime warm-up"),
    ("machine", "machine"),
    ("git_commit", "gradmem commit"),
)


def environment(a, b):
    """[{key, what, a, b}] of each provenance entry (or sub-entry of a dict) that differs."""
    pa, pb = a.get("provenance") or {}, b.get("provenance") or {}
    rows = []
    for key, what in ENVIRONMENT_KEYS:
        va, vb = pa.get(key), pb.get(key)
        if isinstance(va, dict) or isinstance(vb, dict):
            va, vb = va or {}, vb or {}
            for sub in sorted(set(va) | set(vb)):
                if va.get(sub) != vb.get(sub):
                    rows.append({"key": f"{key}.{sub}", "what": what, "a": va.get(sub), "b": vb.get(sub)})
        elif va != vb:
            rows.append({"key": key, "what": what, "a": va, "b": vb})
    for key in ("framework_version", "step_program", "step_kind"):
        if a.get(key) != b.get(key):
            rows.append({"key": key, "what": key.replace("_", " "), "a": a.get(key), "b": b.get(key)})
    return rows


def moved(a, b, fraction=MOVED_FRACTION, floor=MOVED_BYTES):
    if a is None or b is None:
        return None
    return abs(b - a) > max(floor, fraction * max(abs(a), abs(b)))


def layer(a, b):
    """Which layer changed, where both records carry a prediction taken before the run
    (record["prediction"], state "predicted" with bytes comparable with the step peak)."""
    pa, pb = a.get("prediction"), b.get("prediction")
    if not pa or not pb:
        side = " and ".join(s for s, p in (("A", pa), ("B", pb)) if not p)
        return {"verdict": None, "reason": f"no prediction in {side}: which layer changed needs one in both"}
    for side, p in (("A", pa), ("B", pb)):
        if p.get("state") != "predicted" or p.get("bytes") is None:
            return {"verdict": None, "reason": f"{side}'s prediction is {p.get('state')}: {p.get('reason')}"}
    if pa.get("method") != pb.get("method"):
        return {"verdict": None, "reason": f"the predictions were taken differently ({pa.get('method')} / "
                                           f"{pb.get('method')})"}
    predicted = _row("predicted", pa["bytes"], pb["bytes"])
    peak = _row("step peak", registry.value(a, "step_peak"), registry.value(b, "step_peak"))
    retained = _row("retained", registry.value(a, "retained"), registry.value(b, "retained"))
    plan = moved(pa["bytes"], pb["bytes"], PREDICTION_MOVED_FRACTION, 0)
    runtime, kept = moved(peak["a"], peak["b"]), moved(retained["a"], retained["b"])
    verdicts = []
    if plan:
        verdicts.append("plan changed: the compiler's prediction moved")
    elif runtime:
        verdicts.append("runtime changed: the prediction is equal, the measured step peak moved")
    if kept:
        verdicts.append("kept-between-steps changed: retained moved")
    if not verdicts:
        verdicts.append("nothing moved beyond noise")
    return {"verdict": "; ".join(verdicts), "plan": plan, "runtime": runtime and not plan, "kept": kept,
            "rows": [predicted, peak, retained], "compares_with": pa.get("compares_with"),
            "rule": f"moved: more than {PREDICTION_MOVED_FRACTION:.1%} for a prediction; more than "
                    f"{MOVED_FRACTION:.0%} and {MOVED_BYTES // 1024} KiB for a measured figure"}


def build(a, b, labels):
    """The whole difference of records `a` and `b` (`labels`: how each is named)."""
    return {
        "a": labels[0], "b": labels[1],
        "figures": figures(a, b),
        "explained": explained(a, b),
        "saved_by_op": saved_by_op(a, b),
        "backward": backward(a, b),
        "environment": environment(a, b),
        "layer": layer(a, b),
        "bound_bytes": {"a": registry.value(a, "bound"), "b": registry.value(b, "bound")},
        "source_mismatch": registry.comparable(a, b),
    }
