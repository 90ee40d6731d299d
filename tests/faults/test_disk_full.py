"""A result file that cannot grow stops the sweep with an error naming the file; the
records already in it stay intact and no temporary file is left. Two ways to fail the
append's write: RLIMIT_FSIZE (EFBIG, works anywhere) and a real full file system (a
small tmpfs in a user and mount namespace: ENOSPC; skipped where unprivileged
namespaces are not allowed)."""

import resource
import shutil
import subprocess

import pytest

from fault_helpers import INSTANT, Sweep

PRIOR = [*INSTANT, "--workload", "all", "--dtype", "float32,float64"]  # 12 records, about 11 KB
CELL = [*INSTANT, "--workload", "unet", "--size", "small"]  # one more, not among them


def prior_records(tmp_path):
    out = tmp_path / "prior.jsonl"
    code, _, stderr = Sweep(tmp_path, *PRIOR, name=out.name).finish()
    assert code == 0, stderr
    return out.read_bytes()


def test_a_file_size_limit_stops_the_sweep_and_keeps_the_records(tmp_path):
    before = prior_records(tmp_path)
    out = tmp_path / "r.jsonl"
    out.write_bytes(before)
    # Every other file the sweep writes is smaller than `before`; the new file (old
    # bytes + one record of about 1 KB) is not, so the append's write fails.
    limit = len(before) + 64

    sweep = Sweep(tmp_path, *CELL, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    code, _, stderr = sweep.finish()

    assert code == 1, stderr
    assert f"cannot write to {out}: File too large" in stderr and "--resume" in stderr
    assert f"{out} keeps every record appended before (0 from this sweep), whole" in stderr
    assert out.read_bytes() == before  # untouched, not cut
    assert sweep.leftovers() == []  # neither the half-written copy nor the scratch directory


def test_a_full_file_system_stops_the_sweep_and_keeps_the_records(tmp_path):
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user and mount namespaces here to mount a small tmpfs")
    before = prior_records(tmp_path)
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "r.jsonl").write_bytes(before)
    # The file (about 20 KB) takes its pages of the tmpfs and leaves 2 (8 KiB); the copy
    # the append writes (the old bytes and one more record) needs as many as the file
    # and more. Sized from the file, so longer records do not outgrow it.
    # After the sweep, the script copies out what the tmpfs holds (it goes with the
    # namespace).
    size_kib = 4 * (-(-len(before) // 4096) + 2)
    script = (f'mount -t tmpfs -o size={size_kib}k none "{disk}" && cp "{tmp_path}/r.jsonl" "{disk}/r.jsonl" || exit 99; '
              f'"$@"; code=$?; cp "{disk}/r.jsonl" "{tmp_path}/after.jsonl"; ls -A "{disk}" > "{tmp_path}/listing"; '
              f'exit $code')
    sweep = Sweep(tmp_path, *CELL, wrap=[unshare, "-rm", "sh", "-c", script, "sh"], out_dir=disk)
    code, _, stderr = sweep.finish()

    assert code == 1, stderr
    assert f"cannot write to {disk}/r.jsonl: No space left on device" in stderr
    assert f"{disk}/r.jsonl keeps every record appended before (0 from this sweep), whole" in stderr
    assert (tmp_path / "after.jsonl").read_bytes() == before  # untouched, not cut
    assert (tmp_path / "listing").read_text().split() == ["r.jsonl"]  # no half-written copy, no lock file
    assert sweep.leftovers() == []  # the scratch directory (outside the tmpfs) is removed


def test_a_full_scratch_directory_stops_the_sweep_with_a_clear_error(tmp_path):
    # 100 bytes: the first worker's job file (about 400 bytes) cannot be written
    sweep = Sweep(tmp_path, "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                  preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100)))
    code, _, stderr = sweep.finish()
    assert code == 1, stderr
    assert f"cannot write the sweep's scratch files in {sweep.scratch}/gradmem-sweep-" in stderr
    assert "File too large" in stderr and "Traceback" not in stderr
    assert not sweep.out.exists() and sweep.leftovers() == []
