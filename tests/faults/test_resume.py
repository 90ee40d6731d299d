"""`harness run --resume` measures only the cells without a record in --out, never
rewrites the records there, and refuses to mix records of other settings."""

from fault_helpers import INSTANT, Sweep, lines


def test_resume_skips_recorded_cells_runs_the_rest_and_shows_the_whole_file(tmp_path):
    out = tmp_path / "r.jsonl"
    code, _, stderr = Sweep(tmp_path, *INSTANT, "--workload", "chained_dot", "--repeat", "2").finish()
    assert code == 0, stderr  # the file a sweep killed after its first cell leaves
    before = out.read_bytes()
    sweep = [*INSTANT, "--workload", "chained_dot,unet,tiny_nerf", "--repeat", "2", "--resume"]

    code, stdout, stderr = Sweep(tmp_path, *sweep).finish()
    assert code == 0, stderr
    assert "resume: 1 cell(s) already in" in stderr and "2 to measure" in stderr
    assert "[1/2 done] unet" in stderr and "chained_dot reference" not in stderr  # only the missing cells ran
    after = out.read_bytes()
    assert after.startswith(before)  # the kept record is untouched
    assert [r["workload"] for r in lines(out)] == ["chained_dot", "unet", "tiny_nerf"]
    assert all(name in stdout for name in ("chained_dot", "unet", "tiny_nerf"))  # the table: the whole file

    code, _, stderr = Sweep(tmp_path, *sweep).finish()
    assert code == 0 and "3 cell(s) already in" in stderr and "0 to measure" in stderr
    assert out.read_bytes() == after  # nothing to do, nothing written

    sweep[sweep.index("--repeat") + 1] = "3"
    code, _, stderr = Sweep(tmp_path, *sweep).finish()
    assert code == 2 and "measured with --repeat 2, this run asks for --repeat 3" in stderr
    assert out.read_bytes() == after  # refused before measuring anything


def test_records_of_other_or_unrecorded_time_settings_are_refused_not_mixed(tmp_path):
    import json

    out = tmp_path / "r.jsonl"
    settings = {"--precision": "0.05", "--threads": "1"}

    def sweep(workloads, **changed):
        chosen = {**settings, **{f"--{k}": v for k, v in changed.items()}}
        return Sweep(tmp_path, *INSTANT, "--workload", workloads, *sum(chosen.items(), ()), "--resume").finish()

    assert sweep("chained_dot")[0] == 0  # one record, measured with these settings
    for changed, said in (
        ({"precision": "0.02"}, "measured with --precision 0.05, this run asks for --precision 0.02"),
        ({"threads": "2"}, "measured with --threads 1, this run asks for --threads 2"),
    ):
        code, _, stderr = sweep("chained_dot,unet", **changed)
        assert code == 2 and said in stderr, stderr
    # a record from before --precision existed (a fixed number of timed steps) is not this sweep's figure
    record = json.loads(out.read_text())
    del record["provenance"]["time_precision"]
    out.write_text(json.dumps(record) + "\n")
    code, _, stderr = sweep("chained_dot,unet")
    assert code == 2 and "measured with no record of it (measured by an older gradmem)" in stderr, stderr
    assert "this run asks for --precision 0.05" in stderr
    assert len(out.read_text().splitlines()) == 1  # refused before measuring anything


def test_a_damaged_line_is_named_and_its_cell_measured_again(tmp_path):
    out = tmp_path / "r.jsonl"
    Sweep(tmp_path, *INSTANT, "--workload", "chained_dot,unet").finish()
    first, second = out.read_text().splitlines()
    out.write_text(first + "\n" + second[: len(second) // 2] + "\n")  # a cut line, newline-ended

    code, _, stderr = Sweep(tmp_path, *INSTANT, "--workload", "chained_dot,unet", "--resume").finish()
    assert code == 0, stderr
    assert f"{out}:2: not a JSON record" in stderr and "1 to measure" in stderr
    kept, cut, again = out.read_text().splitlines()
    assert kept == first and cut == second[: len(second) // 2]  # nothing rewritten
    assert [r["workload"] for r in lines_of(kept, again)] == ["chained_dot", "unet"]  # unet measured again


def lines_of(*texts):
    import json

    return [json.loads(text) for text in texts]
