"""The installer's reason: its last lines, each kept readable (harness/versions/install.py)."""

import pytest

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


def test_a_release_a_machines_pip_constraint_refuses_says_so_on_the_first_line(tmp_path, monkeypatch):
    # A machine's pip.conf may cap torch (`constraint = ...`): pip's resolver then names the
    # cap several lines above its last, and the sweep's console shows the reason's first line.
    from harness.frameworks.base import Unavailable
    from harness.versions import envs

    log = tmp_path / "pip.log"
    log.write_text("ERROR: Cannot install torch===2.15.0 because these package versions have conflicting "
                   "dependencies.\n\nThe conflict is caused by:\n    The user requested torch===2.15.0\n"
                   "    The user requested (constraint) torch<=2.14.1\n\nTo fix this you could try to:\n"
                   "1. loosen the range\n2. remove package versions\n\nERROR: ResolutionImpossible: for help visit "
                   "https://pip.pypa.io/en/latest/topics/dependency-resolution/\n")
    monkeypatch.setattr(install, "run", lambda command, path, timeout_s=None: (1, install.tail(path)))
    with pytest.raises(Unavailable) as refused:
        envs._step(["pip", "install", "torch===2.15.0"], str(log), "pip install torch===2.15.0")
    assert str(refused.value).splitlines()[0].startswith(
        "pip install torch===2.15.0 failed (exit 1): a pip constraint set outside gradmem refuses it (torch<=2.14.1;")
    # an install that fails for another reason says nothing of a constraint
    log.write_text("ERROR: No matching distribution found for torch==9.9\n")
    with pytest.raises(Unavailable) as missing:
        envs._step(["pip"], str(log), "pip install torch==9.9")
    assert "constraint" not in str(missing.value)
    assert str(missing.value).startswith("pip install torch==9.9 failed (exit 1); ")
