"""`--executor ray`: a sweep's passes as Ray tasks on a cluster's nodes (docs/ray.md).

The executor interface of harness/sweep/executor.py (submit, outcomes, cancel_all),
with Ray doing the placing. Each pass is one Ray task (node_pass.run) that starts the
same fresh worker process on its node as LocalExecutor does here, with the same
environment settings, and sends back the outcome; the driver (this process) turns
outcomes into records and appends them as they arrive (harness/sweep/api.py).

What may share a node, in Ray resources: every gradmem node advertises one unit of
`gradmem_node` (``ray start --resources '{"gradmem_node": 1}'``). A time pass, and
a CUDA memory pass (NVML's figures are per device), take the whole unit: nothing else
of gradmem runs on that node meanwhile, and they wait until nothing does. Every other
pass takes a sliver of it and one CPU, so memory passes share a node up to its cores.
CUDA cells' passes ask for a GPU (`num_gpus=1`). A time pass is sent where its cell's
memory pass ran (a soft preference: elsewhere only if that node is gone), so a record's
figures come from one machine.

A pass whose task is lost (its node or Ray worker died: any Ray failure but an
exception of the pass's own code) runs once more, on another node when there is one;
lost again, it is an "error" naming both nodes. Ray's own retries are off, so no pass
runs twice unseen, and records are written only by the driver: none is lost or written
twice. Each outcome names its node (`Outcome.node`: host, Ray node id, address, its
machine and gradmem commit); the record's provenance carries it (cell_runner.py).

Pinned framework versions (F==VERSION, and so `harness releases --executor ray`): the
driver builds the version's environment as for a local sweep (the record's versions,
and `unavailable` before anything is sent when it cannot be built), and each node builds
its own from the same pins into its own cache (node_pass.py), once per node; the record's
`node` names the environment and the versions the pass ran with.
"""

import collections
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from harness.choices import ChoiceError
from harness import interrupts
from harness.sweep import node_pass
from harness.sweep.worker_process import Outcome

RESOURCE = "gradmem_node"
SHARE = 0.001  # a shared pass's part of its node's unit (Ray resolves 1e-4)
INSTALL = "pip install 'gradmem[ray]' (ray==2.60.0), on the driver and on every node"
LOCAL_OBJECT_STORE = 256 * 1024**2  # the cluster started here when no --address is given
WAIT_S = 0.05


class ClusterError(ChoiceError):
    """The cluster cannot run a sweep (Ray missing, unreachable, no gradmem node)."""


def import_ray():
    try:
        import ray
    except ImportError as err:
        raise ClusterError(f"--executor ray needs Ray, which this environment lacks ({err}): {INSTALL}") from None
    return ray


@dataclass
class _Running:
    task: object
    payload: dict
    inputs: dict
    node: dict = None  # where the current attempt runs, once it said
    lost: list = field(default_factory=list)  # [(node or None, error text)] of lost attempts
    framework_env: dict = None  # a pinned version's environment on that node (path, versions)


class RayExecutor:
    """Runs passes as Ray tasks on the cluster at `address` (None: a one-node cluster
    started here for the sweep). A caller already connected (ray.is_initialized()) keeps
    its connection: the executor then neither connects nor shuts Ray down."""

    def __init__(self, workdir, address=None, on_start=None, on_end=None):
        self.ray = ray = import_ray()
        _check_listening(address)  # before ray.init, which retries for minutes
        self.workdir, self.address = workdir, address
        self.on_start, self.on_end = on_start, on_end
        self.owns = not ray.is_initialized()
        if self.owns:
            self._connect(address)
        try:
            resources = ray.cluster_resources()
            if not resources.get(RESOURCE):
                raise ClusterError(
                    f"no node of the Ray cluster at {address or 'this machine'} offers the {RESOURCE!r} resource: "
                    f"start every node that may run gradmem passes with "
                    f"ray start ... --resources '{{\"{RESOURCE}\": 1}}' (docs/ray.md)"
                )
            self.has_gpu = bool(resources.get("GPU"))
        except BaseException:
            self.close()
            raise
        self.function = ray.remote(node_pass.run)
        self.running = {}  # ObjectRefGenerator -> _Running
        self.ready = collections.deque()  # (task, Outcome) decided without a task
        self.files = {}  # driver path -> ObjectRef of its bytes (a reference gradient, put once)
        self.cancelled = False

    def _connect(self, address):
        ray = self.ray
        sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it; interrupts.py's must stay
        try:
            if address:
                ray.init(address=address, logging_level="WARNING", log_to_driver=False)
            else:
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a cluster of our own does not report usage
                ray.init(
                    address="local", resources={RESOURCE: 1}, object_store_memory=LOCAL_OBJECT_STORE,
                    include_dashboard=False, logging_level="WARNING", log_to_driver=False,
                )
        except (ConnectionError, RuntimeError, ValueError) as err:
            where = f"--address {address}: cannot connect to a Ray cluster there" if address else "cannot start Ray here"
            raise ClusterError(f"{where}: {err}") from None
        finally:
            if signal.getsignal(signal.SIGTERM) is not sigterm and sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)

    def gpus(self):
        """(present, where) for plan.unavailable_reason: the cluster's GPUs, not this machine's."""
        return self.has_gpu, "on any node of the Ray cluster"

    # ---- the interface ---------------------------------------------------------------
    def submit(self, task):
        if self.cancelled:
            raise RuntimeError("this executor was cancelled; it runs nothing more")
        if task.python and not task.pinned:
            message = ("an interpreter of the driver's that is not a pinned version cannot be run on a Ray cluster "
                       f"({task.python}): measure it with the local executor")
            self.ready.append((task, Outcome("unavailable", message)))
            return
        payload = {
            "job": task.job,
            "env": node_pass.settings(task.env),
            "name": task.name,
            "timeout_s": task.timeout_s,
            "sample_rss": task.sample_rss,
            "returns": "out_path" if task.job.get("kind") == "reference_gradient" else None,
            "pinned": task.pinned,
        }
        inputs = {}
        path = task.job.get("reference_gradient_path")
        if path:
            if path not in self.files:
                with open(path, "rb") as handle:
                    self.files[path] = self.ray.put(handle.read())
            inputs["reference_gradient_path"] = self.files[path]
        self._launch(_Running(task, payload, inputs))

    def outcomes(self):
        """Yield (task, Outcome) as passes end, until nothing is queued or running."""
        try:
            while self.ready or self.running:
                while self.ready:
                    yield self.ready.popleft()
                if not self.running:
                    continue
                done, _ = self.ray.wait(list(self.running), num_returns=1, timeout=WAIT_S)
                for generator in done:
                    ended = self._advance(generator)
                    if ended is not None:
                        yield ended
        except GeneratorExit:
            raise
        except BaseException as err:
            self.cancel_all()
            signum = interrupts.stopping()
            if isinstance(err, KeyboardInterrupt) and signum and not isinstance(err, interrupts.Interrupted):
                # the signal handler's Interrupted came out of Ray's wait as a bare
                # KeyboardInterrupt: the exit code must still say which signal
                raise interrupts.Interrupted(signum) from None
            raise

    def cancel_all(self):
        """Cancel every running task (its Ray worker is killed, and the gradmem worker
        with it) and drop what was not started; returns how many were running."""
        self.cancelled = True
        self.ready.clear()
        running, self.running = list(self.running), {}
        for generator in running:
            try:
                self.ray.cancel(generator, force=True)
            except Exception:  # noqa: BLE001 - already ended, or the cluster is gone
                pass
        return len(running)

    def close(self):
        """Disconnect (and stop the cluster this executor started)."""
        if self.owns and self.ray.is_initialized():
            self.ray.shutdown()

    def busy(self):
        return len(self.running)

    # ---- placing and following tasks -------------------------------------------------
    def _launch(self, entry, avoid=None):
        task = entry.task
        whole = task.gated or task.exclusive
        options = {"num_cpus": 1, "max_retries": 0, "resources": {RESOURCE: 1 if whole else SHARE}}
        cell = task.job.get("cell") or {}
        if cell.get("device") == "cuda" and task.job.get("kind") in ("memory", "time"):
            options["num_gpus"] = 1
        strategy = self._placement(options, avoid, getattr(task, "prefer_node", None))
        if strategy is not None:
            options["scheduling_strategy"] = strategy
        entry.node = None
        generator = self.function.options(**options).remote(entry.payload, entry.inputs)
        self.running[generator] = entry

    def _placement(self, options, avoid, prefer):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if avoid is None:
            if prefer and prefer.get("ray_node_id"):
                return NodeAffinitySchedulingStrategy(prefer["ray_node_id"], soft=True)
            return None
        needed = dict(options["resources"], CPU=options["num_cpus"], GPU=options.get("num_gpus", 0))
        others = [
            node["NodeID"] for node in self.ray.nodes()
            if node.get("Alive") and node["NodeID"] != avoid
            and all(node.get("Resources", {}).get(key, 0) >= amount for key, amount in needed.items() if amount)
        ]
        # no other node able to run it: Ray places it (on the same node, if it is alive)
        return NodeAffinitySchedulingStrategy(sorted(others)[0], soft=False) if others else None

    def _advance(self, generator):
        """Take the next item of a task; (task, Outcome) when its pass has ended."""
        ray, entry = self.ray, self.running[generator]
        try:
            item = ray.get(next(generator))
        except StopIteration:  # ended without an outcome: cannot happen but by a lost task
            return self._lost(generator, entry, "the task ended without an outcome")
        except ray.exceptions.TaskCancelledError:
            self.running.pop(generator, None)
            return None
        except ray.exceptions.RayTaskError as err:  # the pass's own code raised: not a lost node
            self.running.pop(generator, None)
            return self._ended(entry, Outcome("error", f"the pass's Ray task failed{_on(entry.node)}: {err}"))
        except ray.exceptions.RayError as err:  # worker or node died, object lost
            return self._lost(generator, entry, f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
        if entry.node is None:  # the task started and says where
            entry.node = item
            entry.task.started = time.monotonic()
            entry.task.node = _summary(item)
            if self.on_start is not None:
                self.on_start(entry.task)
            return None
        self.running.pop(generator, None)
        entry.framework_env = item.get("framework_env")
        if item["file"] is not None:  # the reference gradient, where the driver's cells look for it
            with open(entry.task.job["out_path"], "wb") as handle:
                handle.write(item["file"])
        samples = item["samples"]
        outcome = Outcome(
            item["status"], item["message"], item["result"], [tuple(mark) for mark in item["marks"]],
            SimpleNamespace(**samples) if samples else None, item["wall_s"],
        )
        return self._ended(entry, outcome)

    def _lost(self, generator, entry, error):
        self.running.pop(generator, None)
        entry.lost.append((entry.node, error))
        if len(entry.lost) == 1:
            self._launch(entry, avoid=(entry.node or {}).get("ray_node_id") or "")
            return None
        (first, first_error), (second, second_error) = entry.lost
        message = (f"the pass was lost twice: its Ray task died{_on(first)} ({first_error}), "
                   f"then again when run once more{_on(second)} ({second_error})")
        return self._ended(entry, Outcome("error", message))

    def _ended(self, entry, outcome):
        task = entry.task
        task.ended = time.monotonic()
        if task.started is None:
            task.started = task.ended
        if entry.node is not None:
            outcome.node = dict(_summary(entry.node), machine=entry.node["machine"])
            if entry.framework_env:
                outcome.node["framework_env"] = entry.framework_env
            if entry.lost:
                lost_node, error = entry.lost[0]
                outcome.node["rerun_after"] = f"lost{_on(lost_node)}: {error}"
        if self.on_end is not None:
            self.on_end(task, outcome)
        return task, outcome


def _check_listening(address, timeout_s=5.0):
    """Fail fast where nothing listens at a HOST:PORT address (ray.init would retry for
    minutes); other forms ('auto', 'ray://...') are left to Ray."""
    host, _, port = (address or "").rpartition(":")
    if not host or "/" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ClusterError(
            f"--address {address}: no Ray cluster answers there ({err}); start one with "
            f"ray start --head --resources '{{\"{RESOURCE}\": 1}}' and pass the address it prints (docs/ray.md)"
        ) from None


def _summary(node):
    return {key: node[key] for key in ("hostname", "ray_node_id", "ip", "git_commit", "python")}


def _on(node):
    if not node:
        return " before it said on which node"
    return f" on node {node['hostname']} (Ray node {node['ray_node_id'][:12]}, {node['ip']})"
