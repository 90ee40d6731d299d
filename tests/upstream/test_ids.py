"""A change's id and the line that names it: one change of a store, or one clear error."""

import pytest

from harness.choices import ChoiceError
from harness.releases import confirm
from harness.upstream import ids

from harness.units import MIB


def _change(figure, before="2.3.1", after="2.4.0", workload="rnn_fanout", mode="compiled", **extra):
    return {"workload": workload, "mode": mode, "figure": figure, "before_release": before, "release": after,
            "advisory": False, **extra}


def test_an_id_names_the_framework_series_figure_and_release_pair():
    change = _change("retained")
    assert ids.of("torch", change) == "torch:rnn_fanout:compiled:retained:2.3.1->2.4.0"
    assert ids.parse("torch:rnn_fanout:compiled:retained:2.3.1->2.4.0") == (
        "torch", "rnn_fanout", "compiled", "retained", "2.3.1", "2.4.0")
    # a phase's figure has a dot, a release may have four parts: the id still reads back
    assert ids.parse("jax:seq2seq_attention:eager:step_peak.backward:0.9.0->0.9.0.1")[3:] == (
        "step_peak.backward", "0.9.0", "0.9.0.1")


def test_a_line_of_the_docs_or_the_page_names_its_change():
    docs = ("- **torch** rnn_fanout compiled retained: 2.3.1 -> 2.4.0: side by side 15.28 MiB -> 21.01 MiB "
            "(+37.5%), 5 pairs, p = 0.00397; sweep 15.31 MiB -> 21.01 MiB (3+3 rounds)")
    assert ids.parse(docs) == ("torch", "rnn_fanout", "compiled", "retained", "2.3.1", "2.4.0")
    tagged = "- **torch** (py3.10) unet eager step_peak: 1.13.1 -> 2.0.0: side by side ..."
    assert ids.parse(tagged)[:2] == ("torch", "unet")
    # the page's line: confirm.line without the bold framework
    page = confirm.line(dict(_change("step_peak", "0.5.0", "0.5.1", "chained_dot"), before=60 * MIB,
                             after=55 * MIB, before_samples=[1, 2], after_samples=[1, 2], confirmation={}))
    assert ids.parse("jax " + page)[1:] == ("chained_dot", "compiled", "step_peak", "0.5.0", "0.5.1")


@pytest.mark.parametrize("text", ["garbage", "torch:rnn_fanout:compiled:retained", "torch:::x:1->2", ""])
def test_neither_an_id_nor_a_line_is_one_error_saying_what_an_id_is(text):
    with pytest.raises(ChoiceError, match="FRAMEWORK:WORKLOAD:MODE:FIGURE:BEFORE->AFTER"):
        ids.parse(text)


def test_an_unknown_change_is_named_with_the_changes_its_series_has():
    document = {"changes": [_change("retained"), _change("footprint")]}
    assert ids.find(document, "torch", "torch:rnn_fanout:compiled:footprint:2.3.1->2.4.0")["figure"] == "footprint"
    with pytest.raises(ChoiceError, match="its changes of rnn_fanout compiled: .*retained:2.3.1->2.4.0"):
        ids.find(document, "torch", "torch:rnn_fanout:compiled:retained:2.3.1->2.5.0")
    with pytest.raises(ChoiceError, match="this store is torch's"):
        ids.find(document, "torch", "jax:rnn_fanout:compiled:retained:2.3.1->2.4.0")


def test_a_group_is_its_series_and_pair_the_lead_first_and_its_slug_a_file_name():
    document = {"changes": [_change("first_step_peak"), _change("retained"), _change("step_peak"),
                            _change("retained", "2.4.0", "2.4.1")]}
    members = ids.group_members(document, document["changes"][1])
    assert [c["figure"] for c in members] == ["step_peak", "retained", "first_step_peak"]  # the page's order
    assert ids.group_of("torch", confirm.group_key(members[0])) == "torch:rnn_fanout:compiled:2.3.1->2.4.0"
    assert ids.slug("torch:rnn_fanout:compiled:2.3.1->2.4.0") == "torch-rnn_fanout-compiled-2.3.1-to-2.4.0"
