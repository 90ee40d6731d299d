"""What a new figure costs: one `Figure` line in harness/figures.py, and one column entry
where the run's table shows it. A copy of the package gets exactly those two lines;
the detector, `bisect --metric`, `diff`, the page and the table then show the figure,
with no other file touched (docs/design.md, "What a change costs")."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

REGISTRY_LINE = ('    Figure("planted", "planted figure", "bytes", CELL, ("bound_bytes",), (), "a figure added by the test", '
                 'readers=frozenset({DETECT, BISECT, DIFF, PAGE})),\n')
COLUMN_LINE = '    figure_column("planted", "planted MiB"),\n'

PROBE = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from harness import figures
    from harness.diff import compare
    from harness.releases import detect
    from harness.report import grid
    from harness.sweep import summary_table
    from harness.bisect import command as bisect
    from report_fixtures import MIB, fixture_record

    def record(release, bound):
        r = fixture_record("chained_dot", "autograd", version=release, bound_bytes=bound)
        r["release_round"] = 1
        return r

    records = [record("1.0", 4 * MIB), record("1.0", 4 * MIB), record("1.1", 9 * MIB), record("1.1", 9 * MIB)]
    found = detect.detect(records)
    print(json.dumps({
        "detector": "planted" in detect.FIGURES and any(c.figure == "planted" for c in found.changes),
        "bisect": "planted" in bisect.METRICS,
        "diff": any(row["figure"] == "planted figure" for row in compare.figures(records[0], records[2])),
        "page": 'data-figure="planted"' in grid._ok_cell(records[0], 0, None),
        "table": "planted MiB" in summary_table.format_table(records[:1]),
    }))
''')


def test_a_new_figure_is_one_registry_line_and_one_column(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    registry = copy / "harness" / "figures.py"
    text = registry.read_text()
    anchor = '    Figure("grad_rel_err",'
    assert anchor in text
    registry.write_text(text.replace(anchor, REGISTRY_LINE + anchor, 1))
    table = copy / "harness" / "sweep" / "summary_table.py"
    text = table.read_text()
    anchor = '    figure_column("time", "time s"),'
    assert anchor in text
    table.write_text(text.replace(anchor, COLUMN_LINE + anchor, 1))
    changed = [p for p in (copy / "harness").rglob("*.py")
               if p.read_bytes() != (ROOT / p.relative_to(copy)).read_bytes()]
    assert sorted(p.name for p in changed) == ["figures.py", "summary_table.py"]

    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(copy), str(ROOT / "tests" / "report")]))
    done = subprocess.run([sys.executable, str(probe), str(copy)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    import json

    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown == {"detector": True, "bisect": True, "diff": True, "page": True, "table": True}
