"""The page's study tables: checkpointing (remat) and the reference engine's orders."""

from harness.report import orders, page, remat
from report_fixtures import MIB, fixture_record


def _peak(mib, seconds=0.01):
    return {"peak_bytes": {"total": mib * MIB}, "time_s": {"total": seconds}}


def test_checkpointing_table_says_whether_each_strategy_lowered_the_peak():
    records = [
        fixture_record("unet", "torch", **_peak(100)),
        fixture_record("unet", "torch", remat="native", **_peak(60, 0.02)),
        fixture_record("unet", "torch", remat="native:reentrant", **_peak(130, 0.02)),
        fixture_record("unet", "tensorflow", **_peak(50)),
        fixture_record("unet", "tensorflow", remat="native", **_peak(50.5)),
        fixture_record("unet", "pytensor", remat="native", status="unavailable", message="pytensor offers none"),
    ]
    html = remat.render(records)
    assert "-40% · lowered" in html and "+30% · raised" in html and "+1% · unchanged" in html
    assert "recompute 10 ms/step" in html
    assert "unavailable" in html  # a strategy that could not run shows its status


def test_no_remat_records_no_checkpointing_section():
    assert remat.render([fixture_record("unet", "torch")]) == ""
    assert 'id="checkpointing"' not in page.render([fixture_record("unet", "torch")], ["f.jsonl"])


def test_order_table_gives_each_order_against_the_heap():
    records = [
        fixture_record("shared_linear", "reference", order="heap", **_peak(4)),
        fixture_record("shared_linear", "reference", order="bfs", **_peak(32)),
        fixture_record("shared_linear", "reference", order="dfs", **_peak(4)),
        fixture_record("shared_linear", "torch", **_peak(16)),  # not the engine: left out
    ]
    html = orders.render(records)
    assert "8.00×" in html and html.count("1.00×") == 2
    assert 'id="orders"' in page.render(records, ["f.jsonl"])


def test_one_order_only_gives_no_order_section():
    assert orders.render([fixture_record("shared_linear", "reference", order="heap")]) == ""
