"""Reproduced standalone or harness only: the same direction and at least half the size."""

from harness.upstream import verdict

from harness.units import MIB


def _change(delta_mib, figure="retained"):
    return {"figure": figure, "before_release": "A", "release": "B", "delta": delta_mib * MIB,
            "confirmation": {"status": "confirmed", "before": 10 * MIB, "after": (10 + delta_mib) * MIB,
                             "delta": delta_mib * MIB, "relative": delta_mib / 10, "p": 0.004, "pairs": 5}}


def _runs(before, after, figure="retained", failed=()):
    def side(values, release):
        runs = {i: {"status": "ok", "figures": {figure: v * MIB}} for i, v in enumerate(values, 1)}
        for i in failed:
            runs[i] = {"status": "failed", "message": f"exit 1: {release} broke"}
        return runs
    return {"A": side(before, "A"), "B": side(after, "B")}


def test_the_same_way_by_half_or_more_reproduces():
    found = verdict.judge(_change(+6), _runs([15.0, 15.2, 15.1], [18.1, 18.0, 18.3]))
    assert found["status"] == "reproduced"
    assert abs(found["delta"] - 3.0 * MIB) < 1 and abs(found["share"] - 0.5) < 1e-9  # exactly half holds
    assert found["p"] == 0.05  # three runs a side, completely apart: 1/20


def test_less_than_half_or_the_other_way_is_harness_only_saying_which():
    small = verdict.judge(_change(+6), _runs([15.0, 15.0, 15.0], [17.9, 17.9, 17.9]))
    assert small["status"] == "harness only" and "48% of the harness's move" in small["why"]
    other = verdict.judge(_change(-4, "step_peak"), _runs([10, 10, 10], [11, 11, 11], "step_peak"))
    assert other["status"] == "harness only" and other["why"].startswith("moved the other way standalone; ")
    assert verdict.judge(_change(+2), _runs([5, 5], [5, 5]))["why"].startswith("no move standalone")


def test_gradmems_own_pass_beside_the_script_tells_harness_only_from_not_reproduced_here():
    script = _runs([9.0, 9.0, 9.1], [9.0, 8.9, 9.0])  # the script: no move
    # gradmem's own pass today moves as the store's confirmation did: the two measurements differ
    found = verdict.judge(_change(-1.5), script, control=_runs([9.0, 9.1, 9.0], [7.5, 7.6, 7.5]))
    assert found["status"] == "harness only" and "gradmem's own pass today: 9.00 -> 7.50 MiB (100% of it)" in found["why"]
    # neither moves today: the store's move does not hold on this machine, for either
    found = verdict.judge(_change(-1.5), script, control=_runs([9.0, 8.9, 9.1], [9.0, 9.1, 9.0]))
    assert found["status"] == "not reproduced here" and abs(found["control"]["delta"]) < 0.2 * MIB
    # a script that reproduces needs no control, whatever one says
    found = verdict.judge(_change(-1.5), _runs([9.0, 9.0], [7.5, 7.5]), control=_runs([9, 9], [9, 9]))
    assert found["status"] == "reproduced" and "control" not in found


def test_too_few_ok_runs_is_a_failure_with_their_messages():
    found = verdict.judge(_change(+6), _runs([15.0, 15.0], [21.0, 21.0], failed=(1,)))
    assert found["status"] == "failed" and found["why"] == "1 ok run(s) on a side; 2 needed"
    assert any("broke" in m for m in found["messages"])


def test_a_growth_per_step_change_is_judged_in_its_own_unit():
    # TensorFlow seq2seq_attention eager 2.16.2 -> 2.17.0 in shape: 216 KiB a step stops at 19
    kib = 1024 / MIB
    stops = _change(-197 * kib, "leak")
    found = verdict.judge(stops, _runs([210 * kib, 220 * kib, 215 * kib], [20 * kib, 18 * kib, 19 * kib], "leak"))
    assert found["status"] == "reproduced" and abs(found["delta"] + 196 * 1024) < 1
    # the script flat, gradmem's own pass beside it too: not reproduced here, said in KiB
    flat = _runs([19 * kib] * 3, [19 * kib] * 3, "leak")
    found = verdict.judge(stops, flat, control=flat)
    assert found["status"] == "not reproduced here"
    assert "gradmem's own pass today: 19.0 -> 19.0 KiB (" in found["why"]
