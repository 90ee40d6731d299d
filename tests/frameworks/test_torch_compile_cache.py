"""Each compiled torch worker starts with an empty Inductor cache of its own.

By default Inductor caches compiled graphs in /tmp/torchinductor_$USER, shared by every
process of the user: a cell whose graphs an earlier process compiled loads them, and
its retained and first-step figures then measure that, not a compile (seq2seq_attention
small on 2.15.0: retained 24.4 MiB warm against 109.9 cold). The same cell run twice
here must compile cold both times: each memory pass names a new directory as Inductor's
cache, empty when loaded, removed when the pass ends, and Inductor's default directory
(under the worker's TMPDIR) gets no compiled graph. Two cold compiles of chained_dot tiny.
"""

import os

import pytest

from harness import frameworks
from harness.sweep import environment
from harness.sweep.worker_process import run_worker

pytestmark = pytest.mark.slow  # two cold torch.compile loads (g++): 95-150 s at load 9 on 2 cores, most of it load()

CELL = {"workload": "chained_dot", "size": "tiny", "dtype": "float32", "framework": "torch",
        "mode": "compiled", "device": "cpu"}


def test_every_compiled_pass_compiles_into_an_empty_cache_of_its_own(tmp_path):
    adapter = frameworks.get("torch")
    ok, why = adapter.available()
    if not ok:
        pytest.skip(why)
    default_tmp = tmp_path / "tmp"  # where Inductor's default cache would go
    default_tmp.mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    env, _ = environment.worker_environment(adapter, "memory")
    env = dict(env, TMPDIR=str(default_tmp))
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)

    used = []
    for run in range(2):
        job = {"kind": "memory", "cell": CELL, "seed": 0, "warmup": 1, "predict": False}
        outcome = run_worker(job, env, str(workdir), f"memory-{run}", timeout_s=600)
        assert outcome.ok, outcome.message
        cache = outcome.result["settings"]["inductor_cache"]
        assert cache["entries_at_load"] == 0, cache  # empty when the framework loaded
        assert os.path.dirname(cache["dir"]) == str(workdir), cache  # the pass's own, beside its result
        assert not os.path.exists(cache["dir"]), "removed when the pass ended"
        used.append(cache["dir"])
    assert used[0] != used[1]  # the second pass did not find the first one's graphs
    # Inductor compiled into the directories above, never into its shared default. Its
    # precompiled C++ headers stay there by Inductor's design (global, past every cache
    # directory): g++'s input, they change compile time, not what the process holds.
    for default in (p for p in os.listdir(default_tmp) if p.startswith("torchinductor")):
        assert set(os.listdir(default_tmp / default)) <= {"precompiled_headers"}, os.listdir(default_tmp / default)
