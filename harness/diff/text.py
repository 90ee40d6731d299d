"""The difference as text for a terminal (compare.build's data)."""

from harness.measure.breakdown import RSS_METHOD
from harness.report.fmt import human_bytes, human_seconds

TOP_OPS = 12


def _fmt(value, unit="bytes"):
    if value is None:
        return "–"
    return human_seconds(value) if unit == "s" else human_bytes(value)


def _signed(value, unit="bytes"):
    if value is None:
        return "–"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + _fmt(abs(value), unit)


def _table(rows, widths):
    return ["  " + "".join(f"{str(c):<{w}}" if i == 0 else f"{str(c):>{w}}" for i, (c, w) in enumerate(zip(row, widths)))
            for row in rows]


def render(diff):
    out = [f"A: {diff['a']}", f"B: {diff['b']}", ""]
    if diff.get("source_mismatch"):  # host RSS against a device allocator: not one quantity
        out += [f"Warning: {diff['source_mismatch']}; their differences are not a change of one figure.", ""]
    out.append("Figures (each phase; step peak above the step's start, retained: the framework's own pages kept "
               "above the baseline, code pages: library pages paged in, footprint = retained + step peak)")
    rows = [("phase / figure", "A", "B", "B - A")]
    noisy = False
    for r in diff["figures"]:
        marks = ["~" if r.get(f"noisy_{side}") else "" for side in "ab"]
        noisy = noisy or any(marks)
        rows.append((f"{r['phase']:<9} {r['figure']}", _fmt(r["a"], r["unit"]) + marks[0],
                     _fmt(r["b"], r["unit"]) + marks[1], _signed(r["diff"], r["unit"])))
    out += _table(rows, (40, 12, 12, 13))
    if noisy:
        out.append("  ~ time taken while other processes used the CPU: advisory (the record's time_noise says why)")

    e = diff["explained"]
    out += ["", f"Step peak difference by category (whole step): {_signed(e['step_peak']['diff'])}"]
    rows = []
    for r in e["categories"]:
        rows.append((r["figure"], _fmt(r["a"]), _fmt(r["b"]), _signed(r["diff"])))
    u = e["unexplained"]
    rows.append((u["figure"], "", "", _signed(u["diff"])))
    out += _table(rows, (40, 12, 12, 13))
    out.append(f"    ({u['note']})")
    for r in e["categories"]:
        if r["diff"] is None:
            out.append(f"    {r['figure']} not counted: A {r['method_a']}; B {r['method_b']}")
        elif RSS_METHOD in (r["method_a"], r["method_b"]) and not r["same_method"]:
            out.append(f"    {r['figure']} counted differently: A {r['method_a']}; B {r['method_b']}")
    roles = diff.get("backward")
    if roles:
        for side, agg in roles["aggregation"].items():
            if agg:
                out += ["", f"{side.upper()}'s backward: {aggregation_sentence(agg)}"]
            if roles["errors"][side]:
                out += ["", f"{side.upper()}'s backward: not seen ({roles['errors'][side]})"]
        for part, title in (("at_peak", "live at the backward's highest point"), ("allocated", "allocated by the backward")):
            found = roles.get(part)
            if not found:
                continue
            out += ["", f"By role, {title} ({roles['note']})"]
            rows = [(r["figure"], _fmt(r["a"]), _fmt(r["b"]), _signed(r["diff"])) for r in found["rows"]]
            total = found["total"]
            rows.append(("total", _fmt(total["a"]), _fmt(total["b"]), _signed(total["diff"])))
            out += _table(rows, (40, 12, 12, 13))
            if found["grew_most"]:
                out.append(f"  grew most: {found['grew_most']}")

    out += ["", f"Retained difference by category: {_signed(e['retained']['diff'])}"]
    rows = [(r["figure"], _fmt(r["a"]), _fmt(r["b"]), _signed(r["diff"])) for r in e["retained_categories"]]
    rows.append((e["retained_unexplained"]["figure"], "", "", _signed(e["retained_unexplained"]["diff"])))
    out += _table(rows, (40, 12, 12, 13))

    out += ["", *_saved_by_op(diff["saved_by_op"])]
    out += ["", "Environment differences that can move memory"]
    if not diff["environment"]:
        out.append("  none recorded")
    for r in diff["environment"]:
        out.append(f"  {r['key']} ({r['what']}): A {_short(r['a'])} | B {_short(r['b'])}")

    layer = diff["layer"]
    out += ["", "Which layer changed: " + (layer["verdict"] or f"not said ({layer['reason']})")]
    if layer.get("rows"):
        out += _table([(r["figure"], _fmt(r["a"]), _fmt(r["b"]), _signed(r["diff"])) for r in layer["rows"]],
                      (40, 12, 12, 13))
        out.append(f"    ({layer['rule']})")
    return "\n".join(out) + "\n"


def aggregation_sentence(agg):
    largest = agg["largest"]
    return (f"the tape summed {largest['count']} gradients of one tensor in one add_n, {_fmt(largest['bytes'])} "
            f"alive at once (in all {agg['calls']} such sums: {agg['gradients']} gradients, {_fmt(agg['bytes'])}; "
            f"{agg['method']})")


def saved_side_sentence(side, info):
    """What one side's record says of its saved-by-op list (compare.saved_by_op's summary)."""
    if not info["present"]:
        return f"{side.upper()}: not recorded (a record from before saved_by_op)"
    if not info["has_ops"]:
        return f"{side.upper()}: none: {info['method']}"
    return (f"{side.upper()}: {_fmt(info['bytes'])} listed of {_fmt(info['saved_activations_bytes'])} "
            f"saved activations ({info['method']})")


def _saved_by_op(s):
    out = ["Saved activations by op (the op that made each buffer; biggest difference first)"]
    out += [f"  {saved_side_sentence(side, s[side])}" for side in ("a", "b")]
    if not s["rows"]:
        return out
    rows = [("op", "A", "B", "B - A", "  names (A / B)")]
    for r in s["rows"][:TOP_OPS]:
        names = "/".join(filter(None, [",".join(r["names_a"]), ",".join(r["names_b"])]))
        rows.append((r["op"] + ("" if r["in_op_set"] else " *"), f"{_fmt(r['a'])} x{r['count_a']}",
                     f"{_fmt(r['b'])} x{r['count_b']}", _signed(r["diff"]), "  " + names))
    out += _table(rows, (22, 16, 16, 13, 0))
    if len(s["rows"]) > TOP_OPS:
        out.append(f"  ... {len(s['rows']) - TOP_OPS} more ops (--json lists all)")
    out.append("  (* no op of the op set corresponds: the framework's own name)")
    return out


def _short(value, limit=100):
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
