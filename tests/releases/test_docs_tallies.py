"""docs/releases.md's confirmation blocks say what the committed stores hold.

tools/release_tallies.py makes the blocks (the actionable changes, the per-framework and
the per-figure tables, what is left to confirm and its cost) from releases/*.changes.json;
a confirmation run that changes a store without `--write docs/releases.md` after it leaves
the docs stale, and this fails."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("release_tallies", ROOT / "tools" / "release_tallies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_confirmation_blocks_are_the_stores_own():
    tool = _tool()
    docs = (ROOT / "docs" / "releases.md").read_text()
    stores = tool.load()
    for head, block in tool.blocks(stores):
        assert len(block) > 2, head
        assert tool.replace_block(docs, head, block) == docs, (
            f"the block after {head!r} in docs/releases.md is not what the stores hold: "
            "run python tools/release_tallies.py --write docs/releases.md")


def test_replace_block_swaps_only_the_block_after_its_head():
    tool = _tool()
    text = "intro\n\n**Head** says\n\n| a |\n|---|\n| 1 |\n\nafter\n"
    assert tool.replace_block(text, "**Head**", ["| b |", "|---|"]) == "intro\n\n**Head** says\n\n| b |\n|---|\n\nafter\n"


def test_a_sample_wall_is_end_to_end_within_a_run_under_the_later_samples_mode():
    tool = _tool()

    def sample(at, mode):
        return {"mode": mode, "provenance": {"finished_at": f"2026-11-27T{at}+00:00"}}

    records = [sample("01:00:40", "eager"), sample("01:00:00", "eager"), sample("01:02:10", "compiled"),
               sample("02:00:00", "eager"),  # the next run: 58 minutes is not a sample's wall
               sample("02:00:20", "eager"), {"mode": "eager", "provenance": {}}]
    assert tool.sample_walls(records) == {"eager": [40.0, 20.0], "compiled": [90.0]}


def test_the_moved_table_lists_torchs_flagged_step_peak_and_retained_changes_with_their_verdict():
    tool = _tool()
    mib = 1 << 20

    def change(figure, release, advisory=False, confirmation=None):
        return {"workload": "unet", "mode": "eager", "figure": figure, "before_release": "2.1.0", "release": release,
                "before": 10 * mib, "after": 12 * mib, "delta": 2 * mib, "band": mib // 4, "advisory": advisory,
                "parts": {"moved": "retained.file +2.00 MiB"}, "confirmation": confirmation}

    confirmed = {"status": "confirmed", "before": 10 * mib, "after": 12.5 * mib, "pairs": 5, "p": 0.00397}
    torch = {"changes": [change("retained", "2.3.1", confirmation=confirmed), change("step_peak", "2.2.0"),
                         change("time", "2.2.0", advisory=True), change("footprint", "2.2.0")]}
    other = {"changes": [change("retained", "2.2.0")]}
    rows = tool.moved_table([("jax", "jax", None, other), ("torch (py3.11 store)", "torch", "py3.11", torch)])[2:]
    # the step peak before retained; time (advisory) and footprint are not this table's figures; jax is not torch
    assert rows == [
        "| py3.11 | unet eager | step_peak | 2.1.0 -> 2.2.0 | 10.00 -> 12.00 (+2.00) | 0.25 | retained.file +2.00 MiB "
        "| pending |",
        "| py3.11 | unet eager | retained | 2.1.0 -> 2.3.1 | 10.00 -> 12.00 (+2.00) | 0.25 | retained.file +2.00 MiB "
        "| confirmed: 10.00 -> 12.50, 5 pairs, p = 0.00397 |"]
    # a pair that skips releases measured elsewhere says so in the page's words (detect.gap_note)
    gapped = dict(change("retained", "2.3.1"), unmeasured_between=["2.2.0"])
    [row] = tool.moved_table([("torch (py3.11 store)", "torch", "py3.11", {"changes": [gapped]})])[2:]
    assert "| 2.1.0 -> 2.3.1 [not consecutive: 1 release(s) between (2.2.0..2.2.0)" in row
    # a verdict whose pairs came from two machines names them, as confirm.line and the page do
    two = dict(confirmed, machines=["Linux-6.18-v595", "Linux-6.18-v657"])
    [row] = tool.moved_table([("torch (py3.11 store)", "torch", "py3.11",
                               {"changes": [change("retained", "2.3.1", confirmation=two)]})])[2:]
    assert row.endswith("p = 0.00397 (its pairs from 2 machines: Linux-6.18-v595, Linux-6.18-v657) |")
