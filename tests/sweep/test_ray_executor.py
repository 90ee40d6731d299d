"""`harness run --executor ray` on a two-node Ray cluster started on this machine.

The cluster (a head and a second node, one CPU and one gradmem_node unit each, 100 MB
object stores, no dashboard) is started once for the module and shut down after it.
The sweeps run as `python -m harness run ... --executor ray --address ADDR`, the way a
user runs them against a cluster.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from ray.cluster_utils import Cluster  # make setup installs gradmem[ray]

from harness import results

RUN = [sys.executable, "-m", "harness", "run"]
NODE = {"num_cpus": 1, "resources": {"gradmem_node": 1}, "object_store_memory": 100 * 1024**2}
# a cheap cell whose step peak is tens of MiB: a tiny cell's is a few pages (one page is
# 25 %), and 4 MiB peaks (unet small) moved 5 % from run to run here (the forward's
# ~200 KiB of BLAS/heap slack), both locally; tiny_nerf small float64 peaks at ~21 MiB
COMPARED = ["--workload", "tiny_nerf", "--framework", "reference", "--size", "small", "--dtype", "float64"]
QUICK = ["--time-budget", "0", "--repeat", "1", "--warmup", "0"]


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network: Ray would report usage
    nodes = Cluster(initialize_head=True, head_node_args=dict(NODE, include_dashboard=False))
    try:
        nodes.add_node(**NODE)
        nodes.wait_for_nodes()
        yield nodes.address
    finally:
        nodes.shutdown()


def start(tmp_path, name, *args, env=None):
    out = tmp_path / f"{name}.jsonl"
    proc = subprocess.Popen(
        RUN + list(args) + ["--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )
    return proc, out


def finish(started):
    proc, out = started
    stdout, stderr = proc.communicate(timeout=300)
    ended = SimpleNamespace(returncode=proc.returncode, stdout=stdout, stderr=stderr)
    return ended, (results.read_records(out) if out.exists() else [])


def run(tmp_path, name, *args, env=None):
    return finish(start(tmp_path, name, *args, env=env))


def cell_key(record):
    return (record["workload"], record["size"], record["framework"], record["device"])


@pytest.mark.slow  # acceptance: a Ray cluster
def test_a_ray_sweep_measures_what_the_local_one_does(cluster, tmp_path):
    # side by side (resident peaks barely depend on the load; the test takes half the time)
    local = start(tmp_path, "local", *COMPARED, "--device", "cpu,cuda", *QUICK)
    remote = start(tmp_path, "ray", *COMPARED, "--device", "cpu,cuda", *QUICK, "--executor", "ray", "--address", cluster)
    (local, here), (remote, there) = finish(local), finish(remote)
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    assert sorted(map(cell_key, here)) == sorted(map(cell_key, there))  # the same cells, once each
    by_cell = {cell_key(r): r for r in here}
    compared = 0
    for record in there:
        mine = by_cell[cell_key(record)]
        assert record["status"] == mine["status"]
        if record["status"] != "ok":  # cuda: no GPU on either side, said in the cluster's terms
            assert "Ray cluster" in record["message"]
            continue
        # The same worker with the same settings: a resident peak does not depend on who
        # started the process. 2 % (the bar) of a ~21 MiB peak is ~430 KiB.
        for key in ("peak_bytes", "footprint_bytes"):
            for phase, value in mine[key].items():
                assert record[key][phase] == pytest.approx(value, rel=0.02), (key, phase)
                compared += 1
        node = record["provenance"]["node"]
        assert node["ray_node_id"] and node["hostname"] == record["provenance"]["machine"]["hostname"]
        assert record["provenance"]["env"] == mine["provenance"]["env"]  # same settings reached the worker
    assert compared >= 4


@pytest.mark.slow  # acceptance: a Ray cluster
def test_a_planted_error_and_a_planted_hang_get_their_statuses(cluster, tmp_path):
    tiny = ["--workload", "chained_dot", "--framework", "reference", "--size", "tiny", *QUICK,
            "--executor", "ray", "--address", cluster]
    _, (record,) = run(tmp_path, "error", *tiny, env={"GRADMEM_TEST_PLANT": "error:forward"})
    assert record["status"] == "error" and "planted error" in record["message"]
    assert record["provenance"]["node"]["ray_node_id"]  # names where it failed
    _, (record,) = run(tmp_path, "hang", *tiny, "--timeout", "4", env={"GRADMEM_TEST_PLANT": "hang:forward"})
    assert record["status"] == "timeout" and "timeout of 4 s" in record["message"]


def _ray_worker_of_a_memory_pass(ancestor):
    """(Ray worker pid, gradmem worker pid) of a memory pass run by `ancestor`'s cluster."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = _read(entry, "cmdline")
            if "harness.measure.worker" not in cmdline or "memory-" not in cmdline:
                continue
            parent = _parent(int(entry))
            if not _read(parent, "cmdline").startswith("ray::") or not _descends(parent, ancestor):
                continue
            return parent, int(entry)
        except (OSError, ValueError):
            continue
    return None


def _read(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode()


def _parent(pid):
    return int(_read(pid, "stat").rsplit(")", 1)[1].split()[1])


def _descends(pid, ancestor):
    while pid > 1:
        if pid == ancestor:
            return True
        pid = _parent(pid)
    return False


@pytest.mark.slow  # acceptance: a Ray cluster
def test_a_pass_whose_ray_worker_dies_runs_once_more_elsewhere(cluster, tmp_path):
    killed = {}

    def kill_one(deadline):
        while time.monotonic() < deadline and not killed:
            found = _ray_worker_of_a_memory_pass(os.getpid())  # the cluster's processes are ours
            if found:
                os.kill(found[0], signal.SIGKILL)
                killed["pids"] = found
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_one, args=(time.monotonic() + 120,), daemon=True)
    watcher.start()
    proc, records = run(tmp_path, "killed", "--workload", "chained_dot,shared_linear",
                        "--framework", "reference", "--size", "tiny", *QUICK, "--executor", "ray",
                        "--address", cluster)
    watcher.join(5)
    assert killed, "no memory pass was seen running"
    assert proc.returncode == 0, proc.stderr
    # every cell once: none lost with its worker, none written twice
    assert sorted(r["workload"] for r in records) == ["chained_dot", "shared_linear"]
    assert all(r["status"] == "ok" for r in records), [r["message"] for r in records]
    (rerun,) = [r for r in records if "rerun_after" in r["provenance"]["node"]]
    note = rerun["provenance"]["node"]["rerun_after"]
    assert "WorkerCrashedError" in note or "died" in note
    lost_node = note.split("Ray node ")[1][:12]
    assert not rerun["provenance"]["node"]["ray_node_id"].startswith(lost_node)  # the other node
    assert not _alive(killed["pids"][1])  # the gradmem worker died with it


def test_without_ray_or_without_a_cluster_the_error_says_what_to_do(tmp_path):
    fake = tmp_path / "site" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray (hidden by the test)')\n")
    proc, records = run(tmp_path, "noray", "--workload", "chained_dot", "--framework", "reference",
                        "--size", "tiny", "--executor", "ray", env={"PYTHONPATH": str(fake.parent)})
    assert proc.returncode == 2 and not records
    assert "pip install 'gradmem[ray]'" in proc.stderr
    proc, _ = run(tmp_path, "nocluster", "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                  "--executor", "ray", "--address", "127.0.0.1:1")  # nothing listens on port 1
    assert proc.returncode == 2 and "no Ray cluster answers there" in proc.stderr
    proc, _ = run(tmp_path, "badexec", "--executor", "dask")
    assert proc.returncode == 2 and "valid executors: local, ray" in proc.stderr


@pytest.mark.slow  # acceptance: a Ray cluster
def test_sigterm_to_a_ray_sweep_cancels_its_passes_and_exits_143(cluster, tmp_path):
    sweep = start(tmp_path, "stopped", "--workload", "chained_dot", "--framework", "reference", "--size", "tiny",
                  *QUICK, "--executor", "ray", "--address", cluster, env={"GRADMEM_TEST_PLANT": "hang:forward"})
    deadline, found = time.monotonic() + 60, None
    while found is None and time.monotonic() < deadline:
        found = _ray_worker_of_a_memory_pass(os.getpid())  # hangs at its forward mark
        time.sleep(0.05)
    assert found, "no memory pass was seen running"
    sweep[0].send_signal(signal.SIGTERM)
    proc, records = finish(sweep)
    assert proc.returncode == 143 and "interrupted by SIGTERM" in proc.stderr, proc.stderr
    assert records == []
    # the driver's cancel makes Ray kill the task's worker; the gradmem worker dies with it
    deadline = time.monotonic() + 10
    while _alive(found[1]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(found[1])


def _alive(pid):
    try:
        return _read(pid, "stat").rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False
