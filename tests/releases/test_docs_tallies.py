"""docs/releases.md's confirmation blocks say what the committed stores hold.

tools/release_tallies.py makes the blocks (the actionable changes, the per-framework and
the per-figure tables) from releases/*.changes.json; a confirmation run that changes a
store without `--write docs/releases.md` after it leaves the docs stale, and this fails."""

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
    for head, block in ((tool.ACTIONABLE_HEAD, tool.actionable_lines(stores)),
                        (tool.FRAMEWORK_HEAD, tool.framework_table(stores)),
                        (tool.FIGURE_HEAD, tool.figure_table(stores))):
        assert len(block) > 2, head
        assert tool.replace_block(docs, head, block) == docs, (
            f"the block after {head!r} in docs/releases.md is not what the stores hold: "
            "run python tools/release_tallies.py --write docs/releases.md")


def test_replace_block_swaps_only_the_block_after_its_head():
    tool = _tool()
    text = "intro\n\n**Head** says\n\n| a |\n|---|\n| 1 |\n\nafter\n"
    assert tool.replace_block(text, "**Head**", ["| b |", "|---|"]) == "intro\n\n**Head** says\n\n| b |\n|---|\n\nafter\n"
