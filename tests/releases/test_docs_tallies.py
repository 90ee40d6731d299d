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
