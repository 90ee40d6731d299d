"""The installer's reason: its last lines, each kept readable (harness/versions/install.py)."""

from harness.versions import install


def test_a_long_line_keeps_both_ends_and_the_error_after_it_stays(tmp_path):
    # pip's resolver prints every release on one line before its ERROR line
    versions = ", ".join(f"0.{minor}.{patch}" for minor in range(12) for patch in range(40))
    log = tmp_path / "pip.log"
    log.write_text(f"ERROR: Could not find a version that satisfies the requirement jax==0.11.0 "
                   f"(from versions: {versions})\nERROR: No matching distribution found for jax==0.11.0\n")
    reason = install.tail(str(log))
    first, second = reason.splitlines()
    assert len(first) <= install.LINE_CHARS
    assert first.startswith("ERROR: Could not find a version") and first.endswith("0.11.39)")
    assert " ... " in first
    assert second == "ERROR: No matching distribution found for jax==0.11.0"


def test_short_lines_are_kept_whole_and_blank_ones_dropped(tmp_path):
    log = tmp_path / "pip.log"
    log.write_text("Collecting x\n\n   \nERROR: no\n")
    assert install.tail(str(log)) == "Collecting x\nERROR: no"
    assert install.tail(str(tmp_path / "absent.log")) == ""
