"""One pass on a cluster node: what a Ray task of `--executor ray` runs there.

The task does on its node what LocalExecutor does here: it starts the same worker
(``python -m harness.measure.worker`` through runner.run_worker: a fresh process in
a session of its own, killed with its group at the timeout, its RSS sampled from
outside, its end classified as ok/oom/timeout/error) in a temporary directory of the
node, and sends back how it ended. `run` is a generator: it first yields where it runs
(so the driver can name the node even when the node is lost mid-pass), then the
outcome. The worker dies with the Ray worker that started it (worker.py's
PR_SET_PDEATHSIG), so a cancelled or killed task leaves nothing running.

The worker's environment is the node's own (its PATH, HOME, virtual environment) with
the driver's settings for the pass laid over it (`settings` picks them on the driver):
every variable the driver set or changed for the pass (threads, allocator settings,
the adapter's own), every variable that changes what is measured (environment.WATCHED,
and gradmem's own GRADMEM_*) as the driver has it, and none the driver removed (the
time pass's allocator settings) or does not have. So a pass starts with the same
settings as a local one. CUDA_VISIBLE_DEVICES stays the node's: the GPU Ray gave the
task. A pinned framework version (F==VERSION) runs in an environment this node builds
from the same pins as the driver's, in its own cache (`_pinned_environment`).
"""

import os
import shutil
import socket
import tempfile

from harness import origin
from harness.frameworks.base import Unavailable
from harness.sweep import environment
from harness.sweep.worker_process import Outcome, run_worker

NODE_OWN = ("CUDA_VISIBLE_DEVICES",)  # Ray's assignment on the node, never the driver's


def _watched(key):
    return key.startswith(environment.WATCHED_PREFIXES + ("GRADMEM_",)) or key in environment.WATCHED


def settings(env, base=None):
    """(set, unset): what of a pass's environment `env` (built on the driver from `base`,
    default os.environ) travels to the node."""
    base = os.environ if base is None else base
    sent = {k: v for k, v in env.items() if k not in NODE_OWN and (base.get(k) != v or _watched(k))}
    unset = sorted(k for k in base if k not in env and k not in NODE_OWN)
    return sent, unset


def node_environment(sent, unset, base=None):
    """The worker's environment on the node: `base` (os.environ) with the driver's settings."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key in unset or (_watched(key) and key not in sent and key not in NODE_OWN):
            del env[key]
    env.update(sent)
    return env


def where():
    """The node this task runs on: host, Ray node id, address, and its machine."""
    import ray

    return {
        "hostname": socket.gethostname(),
        "ray_node_id": ray.get_runtime_context().get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "pid": os.getpid(),  # the Ray worker process (tests kill it to lose a pass)
        "git_commit": origin.git_commit(),
        "python": origin.python(),
        "machine": origin.machine(),
    }


def run(payload, inputs):
    """The Ray task's body (a generator): yield where(), then the pass's outcome as a dict.
    `inputs`: {job key: ObjectRef of a file's bytes} the job reads (a reference gradient)."""
    yield where()
    workdir = tempfile.mkdtemp(prefix="gradmem-pass-")
    try:
        yield _run_worker(payload, inputs, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_worker(payload, inputs, workdir):
    import ray

    job = dict(payload["job"])
    for key, ref in inputs.items():  # the driver's path becomes a file of this node
        job[key] = os.path.join(workdir, os.path.basename(job[key]))
        with open(job[key], "wb") as handle:
            handle.write(ray.get(ref))
    returns = payload.get("returns")  # a job key naming a file the pass writes
    if returns:
        job[returns] = os.path.join(workdir, os.path.basename(job[returns]))
    env = node_environment(*payload["env"])
    python = framework_env = None
    if payload.get("pinned"):
        try:
            python, env, framework_env = _pinned_environment(payload["pinned"], env, workdir)
        except Unavailable as err:
            return _reply(Outcome("unavailable", f"this node could not build the pinned environment: {err}"))
    outcome = run_worker(job, env, workdir, payload["name"], payload["timeout_s"], payload["sample_rss"],
                         python=python)
    data = None
    if returns and outcome.ok and os.path.exists(job[returns]):
        with open(job[returns], "rb") as handle:
            data = handle.read()
    return _reply(outcome, data, framework_env)


def _reply(outcome, data=None, framework_env=None):
    """What the driver receives of a pass: its Outcome as plain data, the file it wrote
    (`data`), and the pinned environment it ran in."""
    sampler = outcome.sampler
    return {
        "status": outcome.status,
        "message": outcome.message,
        "result": outcome.result,
        "marks": outcome.marks,
        "wall_s": outcome.wall_s,
        "samples": None if sampler is None else {"t": sampler.t, "rss": sampler.rss, "interval_s": sampler.interval_s},
        "file": data,
        "framework_env": framework_env,
    }


def _pinned_environment(pinned, env, workdir):
    """(python, env, what it is) of a pinned version on this node: built into this
    node's cache by the same code and pins as the driver's (versions/envs.py), once per
    node; the worker runs this node's gradmem code in it."""
    from harness import frameworks
    from harness.versions import code_link, envs

    found = envs.for_version(frameworks.get(pinned["framework"]), pinned["version"], pinned.get("torch_index"))
    return found.python, code_link.worker_environment(env, workdir), {"path": found.path, "versions": found.versions}

