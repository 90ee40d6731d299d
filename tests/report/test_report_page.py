"""The comparison page from fixture records (conftest.py): structure, statuses, escaping."""

import json
import re

import pytest

from harness import figures
from harness.cli import main as cli_main
from harness.report import fmt, grid, records, timelines
from harness.report.gradients import precision_note, verdict
from harness.report.page import write_page

from report_fixtures import MIB, fixture_record, fixture_records


def render(tmp_path, recs):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = write_page([str(path)], str(tmp_path / "site"))
    return open(out, encoding="utf-8").read()


def test_cli_writes_index_html(records_file, tmp_path, capsys):
    assert cli_main(["report", str(records_file), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert capsys.readouterr().out.strip().endswith("index.html")
    assert page.startswith("<!DOCTYPE html>")


def test_page_is_self_contained(records_file, tmp_path):
    page = render(tmp_path, fixture_records())
    # Opens from disk: nothing fetched, nothing executed.
    assert "<script" not in page.replace("&lt;script&gt;", "")
    assert not re.search(r'(src|href)="(https?:|//)', page)


def test_grid_has_every_workload_and_framework_of_a_view(tmp_path):
    page = render(tmp_path, fixture_records())
    eager = page.split("tiny · float32 · cpu · eager</h2>")[1].split("</table>")[0]
    for name in ("chained_dot", "rnn_fanout", "reference", "reference (order=bfs)", "torch", "jax", "tensorflow"):
        assert f">{name}</th>" in eager
    # 2 workloads x 5 columns, every cell either a figure, a status or "not run"
    assert eager.count("<td class=\"cell") == 10


def test_statuses_are_shown_with_their_message_escaped(tmp_path):
    page = render(tmp_path, fixture_records())
    for status in ("unavailable", "oom", "error"):
        assert f'class="cell status-{status}"' in page
    assert "worker exceeded the memory limit &lt;&amp;&gt; at backward" in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "jax is not installed" in page


def marked(page, view):
    """{(workload, column)} of the cells a view's grid marks as its row's lowest."""
    table = page.split(f"{view}</h2>")[1].split("</table>")[0]
    head = re.findall(r"<th>([^<]*)</th>", table.split("</thead>")[0])[1:]
    found = set()
    for workload, row in re.findall(r'<tr><th class="workload">([^<]*)</th>(.*?)</tr>', table):
        cells = re.findall(r'<td class="([^"]*)"', row)
        found |= {(workload, column) for column, cls in zip(head, cells) if "lowest" in cls.split()}
    return found


def test_the_cell_shows_peak_over_bound_as_a_number_and_the_row_s_lowest_is_marked(tmp_path):
    page = render(tmp_path, fixture_records())
    # torch chained_dot: 40 MiB over a 4 MiB bound = 10x: a number, not a colour
    assert "40 MiB" in page and "10.00× bound" in page
    assert "hsl(" not in page and not re.search(r'<td[^>]*style="background', page)  # no cell coloured by its figure
    # chained_dot eager: the reference's 6 MiB under torch's 40 MiB (jax did not run);
    # rnn_fanout: one cell ran, nothing to compare
    assert marked(page, "tiny · float32 · cpu · eager") == {("chained_dot", "reference")}
    assert "the lowest step peak of its row" in page  # the legend and the cell's tooltip


def test_an_upper_bound_is_never_the_lowest_and_ties_are_all_marked(tmp_path):
    def on_cuda(framework, mib, **device):
        return fixture_record("chained_dot", framework, device="cuda", device_memory={
            "retained_bytes": 0, "peak_bytes": {"total": mib * MIB}, "footprint_bytes": {"total": mib * MIB},
            **device})

    # JAX's allocator cannot reset its peak: 1 MiB is at most that, so it is not the lowest
    upper = on_cuda("jax", 1, peak_since_reset=False)
    assert figures.upper_bound(upper, "step_peak")
    page = render(tmp_path, [upper, on_cuda("reference", 3), on_cuda("torch", 3), on_cuda("tinygrad", 5)])
    assert marked(page, "tiny · float32 · cuda · eager") == {("chained_dot", "reference"), ("chained_dot", "torch")}


def test_later_file_wins_for_a_repeated_cell(tmp_path):
    old = fixture_record(peak_bytes={"total": 99 * MIB})
    new = fixture_record(peak_bytes={"total": 7 * MIB})
    view = next(iter(records.views([old, new]).values()))
    assert view["cells"][("chained_dot", "reference")]["peak_bytes"]["total"] == 7 * MIB


def test_gradient_verdicts_follow_the_one_rule():
    # the rule harness check applies too (harness/measure/gradients.py): one tolerance per dtype
    assert verdict(1e-6, "float32") == "agrees"
    assert verdict(1e-3, "float32") == "disagrees"  # a VJP off by 1e-3 is caught
    assert verdict(1e-1, "float32") == "disagrees"
    assert verdict(1e-6, "float64") == "disagrees"
    assert verdict(float("nan"), "float32") == "disagrees"
    kink = {"units": 1, "flipped": "the near-zero unit flipped", "float64_side_error": 7.6e-4}
    assert verdict(7e-7, "float32", kink) == "agrees at a relu kink"
    assert verdict(1e-3, "float32", kink) == "disagrees"


def test_an_unset_gpu_matmul_precision_is_the_adapters_default():
    assert precision_note({"device": "cpu", "framework": "jax"}) == ""
    assert "TF32" in precision_note({"device": "cuda", "framework": "jax"})  # JaxAdapter.gpu_matmul_default
    assert precision_note({"device": "cuda", "framework": "torch"}) == "matmul precision not recorded (the framework's default)"
    assert precision_note({"device": "cuda", "framework": "no_such_row"}).endswith("(the framework's default)")
    set_to = {"device": "cuda", "framework": "jax", "provenance": {"settings": {"matmul_precision": "highest"}}}
    assert precision_note(set_to) == "matmul precision: highest"


def test_provenance_lists_every_distinct_commit(tmp_path):
    recs = fixture_records()
    recs[0]["provenance"] = dict(recs[0]["provenance"], git_commit="0ther")
    page = render(tmp_path, recs)
    assert "0ther" in page and "f1x7u4e" in page


def test_thin_keeps_every_peak():
    values = [0] * 10_000
    values[4321] = 7
    times, thinned = timelines.thin(list(range(10_000)), values, limit=100)
    assert len(thinned) <= 100 and max(thinned) == 7 and times[thinned.index(7)] == 4321


@pytest.mark.parametrize("value, text", [(512, "512 B"), (1536, "1.5 KiB"), (40 * MIB, "40 MiB"),
                                         (427_434_688, "407.6 MiB"), (None, "–")])
def test_human_bytes(value, text):
    assert fmt.human_bytes(value) == text


def test_missing_and_bad_files_are_clear_errors(tmp_path, capsys):
    assert cli_main(["report", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path)]) == 2
    assert "nope.jsonl: no such result file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"workload": "chained_dot"}\n')
    assert cli_main(["report", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1: record has no 'schema' key" in err and "no result records in" in err


def test_a_noisy_time_is_marked_on_the_page_and_in_the_table(tmp_path):
    from harness.sweep import summary_table as table

    why = "contended: other processes used 1.00 CPUs (median) during 5 of 5 timed steps"
    recs = [fixture_record("chained_dot", "reference"),
            fixture_record("chained_dot", "torch", time_noisy=True, time_noise=[why])]
    page = render(tmp_path, recs)
    assert f'<div class="time noisy" title="{why}">6 ms ~ noisy</div>' in page  # the grid cell
    assert ">torch ~ noisy</text>" in page and "reference ~ noisy" not in page  # the time bars
    text = table.format_table(recs)
    torch_row = next(line for line in text.splitlines() if line.startswith("chained_dot  torch"))
    assert "0.0060~" in torch_row and "1.00~" in torch_row  # the time and its x ref
    assert "~" not in next(line for line in text.splitlines() if line.startswith("chained_dot  reference"))
    assert why in text  # the reason under the table


def test_a_numpy_row_timed_on_pinned_blas_kernels_is_marked_and_no_other_row_is(tmp_path):
    """A host's OPENBLAS_CORETYPE pins NumPy's kernels: the NumPy row's time is those
    kernels', so the page and the table say so; torch (no numpy.blas) is untouched, and
    neither is a NumPy row on a host that pins nothing or a NumPy without OpenBLAS."""
    from harness import figures
    from harness.sweep import summary_table as table

    def ran(workload, framework, env, settings):
        record = fixture_record(workload, framework)
        record["provenance"].update(env=env, settings=settings)
        return record

    pinned_env = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "GRADMEM_THREADS": "2"}
    numpy_blas = {"numpy.blas": "libscipy_openblas64_-32a4b2a6.so"}
    recs = [ran("chained_dot", "reference", pinned_env, dict(numpy_blas, **{"numpy.blas_core": "Haswell"})),
            ran("chained_dot", "torch", pinned_env, {"threads": 2}),
            ran("rnn_fanout", "reference", {"GRADMEM_THREADS": "2"}, dict(numpy_blas, **{"numpy.blas_core": "SkylakeX"})),
            ran("rnn_fanout", "autograd", pinned_env, {"numpy.blas": "unknown (no bundled OpenBLAS found)"})]
    assert figures.forced_blas(recs[0]) == "OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512"
    assert [figures.forced_blas(record) for record in recs[1:]] == [None, None, None]
    assert figures.forced_blas({}) is None  # a record without provenance
    page = render(tmp_path, recs)
    assert page.count("· pinned BLAS</span>") == 1
    assert "kernels the host pinned (OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE=512)" in page
    notes = table.pinned_blas_notes(recs)
    assert len(notes) == 1 and notes[0].startswith("time of reference: ") and "OPENBLAS_CORETYPE=Haswell" in notes[0]
    assert notes[0] in table.format_table(recs)


def test_a_cell_measured_again_is_counted_once_by_its_newest_record(tmp_path):
    # the site's front page counts cells by their newest record; the page counted records
    again = [fixture_record("chained_dot", "torch", status="error", message="first try failed"),
             *fixture_records()]
    page = render(tmp_path, again)
    shown = len(fixture_records())
    assert f"<p>{shown} cells from 1 file(s) (each cell&#x27;s newest record; 1 older record(s) of cells " in page
    statuses = page[page.index('id="statuses"'):page.index('id="provenance"')]
    assert "first try failed" not in statuses  # measured again, ok: not a cell that did not run
    assert "error: 2" not in page and "error: 1" in page


def test_provenance_says_what_a_null_limit_means():
    from harness.report import provenance

    record = fixture_record()
    record["provenance"].update(memory_limit_bytes=None, timeout_s=600.0)
    limited = fixture_record("rnn_fanout")
    limited["provenance"].update(memory_limit_bytes=2 << 30, timeout_s=None)
    table = provenance.render([record], ["r.jsonl"])
    assert "<th>memory_limit_bytes</th><td>none: no address-space limit (--memory-limit)</td>" in table
    assert "<th>timeout_s</th><td>600 s (--timeout)</td>" in table
    assert ">None<" not in table
    table = provenance.render([limited], ["r.jsonl"])
    assert "2 GiB (2147483648 bytes, --memory-limit)" in table and "none: no time limit (--timeout)" in table


@pytest.mark.parametrize("fraction, digits, shown", [
    (-0.0003, 1, "0.0%"), (0.0004, 1, "0.0%"), (0.0, 1, "0.0%"), (-0.0006, 1, "-0.1%"), (0.123, 1, "+12.3%"),
    (-0.004, 0, "0%"), (0.006, 0, "+1%"), (None, 1, "–"),
])
def test_a_signed_percent_that_rounds_to_zero_has_no_sign(fraction, digits, shown):
    assert fmt.signed_percent(fraction, digits) == shown
