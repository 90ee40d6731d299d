"""Times from two machines are never compared: a Ray sweep's records name their hosts."""

from harness.sweep import summary_table as table
from harness.report import records

from report_fixtures import fixture_record


def on(host, **overrides):
    record = fixture_record(**overrides)
    record["provenance"]["machine"] = {"hostname": host, "cpu": "fixture cpu"}
    return record


def test_a_page_with_two_hosts_has_a_grid_per_host_and_the_table_no_cross_host_ratio():
    ref_a, torch_a, torch_b = on("a"), on("a", framework="torch"), on("b", framework="torch")
    views = records.views([ref_a, torch_a, torch_b])
    titles = [records.view_title(key) for key in views]
    assert titles == ["tiny · float32 · cpu · eager · timed on a", "tiny · float32 · cpu · eager · timed on b"]
    assert table.reference_for(torch_a, [ref_a, torch_a, torch_b]) is ref_a
    assert table.reference_for(torch_b, [ref_a, torch_a, torch_b]) is None  # the reference ran on a


def test_one_host_or_unnamed_hosts_keep_one_grid():
    unnamed = fixture_record(framework="torch")  # from before records named their host
    views = records.views([on("a"), unnamed])
    assert [records.view_title(key) for key in views] == ["tiny · float32 · cpu · eager"]
    assert table.reference_for(unnamed, [on("a"), unnamed]) is not None


def test_two_machines_with_one_host_name_are_two_machines():
    """The lent VMs are all named "vm"; their kernel builds (platform) tell them apart."""
    def vm(platform, **overrides):
        record = on("vm", **overrides)
        record["provenance"]["machine"]["platform"] = platform
        return record

    ref_a, torch_a, torch_b = vm("Linux-v595"), vm("Linux-v595", framework="torch"), vm("Linux-v657", framework="torch")
    views = records.views([ref_a, torch_a, torch_b])
    assert [records.view_title(key) for key in views] == [
        "tiny · float32 · cpu · eager · timed on vm (Linux-v595)", "tiny · float32 · cpu · eager · timed on vm (Linux-v657)"]
    assert table.reference_for(torch_a, [ref_a, torch_a, torch_b]) is ref_a
    assert table.reference_for(torch_b, [ref_a, torch_a, torch_b]) is None  # the reference ran on the other box


def test_memory_and_times_name_their_own_machine_in_one_form():
    """A record whose times were taken on another node (a cluster's time pass) names
    that node for its times and its own machine for its memory figures, both in the one
    form machine_label gives (the confirmation's "pairs from N machines" reads the memory one)."""
    from harness import origin

    record = on("vm")
    record["provenance"]["machine"]["platform"] = "Linux-v595"
    assert origin.measured_on(record) == origin.timed_on(record) == "vm (Linux-v595)"
    record["provenance"]["time_machine"] = {"hostname": "node-7", "platform": "Linux-v700"}
    assert origin.timed_on(record) == "node-7 (Linux-v700)"
    assert origin.measured_on(record) == "vm (Linux-v595)"
    assert origin.measured_on(fixture_record()) is None  # from before records named their machine
