"""What a framework keeps is its own memory; library pages paged in are code pages.

Three workload files of one shape, measured by real memory passes of the reference
engine (fresh workers, as a sweep runs them): a plain one; one whose loss maps a file
and reads every page of it (the way a kernel's first run pages a library in: file-backed,
clean, shared); and one whose loss keeps an anonymous buffer from its first call on
(what a framework's cache or pool does). The mapping must show as code pages and
leave retained alone; the kept buffer must show in retained at its size.
"""

import os
import tempfile
import textwrap

import pytest

from harness import figures, frameworks
from harness.sweep import environment
from harness.sweep.worker_process import run_worker
from harness.units import MIB
from harness.workloads import loader

PLANTED = 16 * MIB  # far above the RSS grain (~0.25 MiB: docs/measurement.md), small enough for CI

WORKLOAD = textwrap.dedent('''
    import mmap

    import numpy as np

    SIZES = {{"tiny": {{"D": 16}}, "small": {{"D": 16}}, "paper": {{"D": 16}}}}
    BATCH_AXIS = "D"
    MAPPED_FILE = {mapped!r}  # a file whose pages the loss reads (None: none)
    KEEP_BYTES = {keep}  # bytes the loss keeps from its first call on (0: none)
    _held = []


    def bound_bytes(cfg, dtype):  # declared: a derived bound would run the loss before the baseline
        return cfg["D"] * cfg["D"] * 4


    def init(rng, cfg, dtype):
        return {{"w": rng.standard_normal((cfg["D"], cfg["D"])).astype(dtype)}}, {{}}


    def loss(ops, params, inputs, cfg):
        if not _held:
            if MAPPED_FILE:
                with open(MAPPED_FILE, "rb") as handle:
                    pages = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
                sum(pages[i] for i in range(0, len(pages), mmap.PAGESIZE))  # each page faulted in
                _held.append(pages)
            if KEEP_BYTES:
                _held.append(bytearray(b"\\x01") * KEEP_BYTES)  # written: resident anonymous pages
        return ops.sum(ops.tanh(params["w"]))
''')


def _disk_dir(tmp_path):
    """A directory on a disk-backed file system: a file on tmpfs is shared memory, not a
    file page (RssShmem), and counts as a process's own memory."""
    with open("/proc/mounts", encoding="ascii") as handle:
        mounts = [line.split() for line in handle]
    target = os.path.realpath(tmp_path)
    fs = max((m for m in mounts if target.startswith(m[1])), key=lambda m: len(m[1]))[2]
    return str(tmp_path) if fs != "tmpfs" else tempfile.mkdtemp(dir=os.path.dirname(__file__))


def _pass(path, tmp_path):
    adapter = frameworks.get("reference")
    cell = {"workload": loader.canonical(str(path)), "size": "tiny", "dtype": "float32", "framework": "reference",
            "mode": "eager", "device": "cpu"}
    env, _ = environment.worker_environment(adapter, "memory")
    outcome = run_worker({"kind": "memory", "cell": cell, "seed": 0, "warmup": 1, "predict": False}, env,
                         str(tmp_path), f"memory-{path.stem}", timeout_s=300)
    assert outcome.ok, outcome.message
    return dict(outcome.result, device="cpu")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own-memory")
    mapped = os.path.join(_disk_dir(tmp), "library.bin")
    with open(mapped, "wb") as handle:
        handle.write(os.urandom(PLANTED))
    found = {}
    for name, (path, keep) in {"plain": (None, 0), "mapped": (mapped, 0), "kept": (None, PLANTED)}.items():
        workload = tmp / f"{name}.py"
        workload.write_text(WORKLOAD.format(mapped=path, keep=keep))
        found[name] = _pass(workload, tmp)
    os.remove(mapped)
    return found


def _moved(measured, name, figure):
    return figures.value(measured[name], figure) - figures.value(measured["plain"], figure)


def test_a_file_mapping_paged_in_is_code_pages_not_retained(measured):
    # the mapped file's pages resident between steps: code pages by its size (a few pages
    # of the reader's own code and the mmap module's come with it), retained unmoved
    assert _moved(measured, "mapped", "code_pages") == pytest.approx(PLANTED, rel=0.05)
    assert abs(_moved(measured, "mapped", "retained")) < 0.05 * PLANTED
    # the process's whole RSS holds both: the host figure named as such
    assert _moved(measured, "mapped", "host_rss_retained") == pytest.approx(PLANTED, rel=0.05)
    # the first step paged them in: its code pages, an upper bound on the peak's file part
    assert figures.value(measured["mapped"], "first_step_code_pages") >= 0.95 * PLANTED


def test_an_anonymous_buffer_kept_between_steps_is_retained_at_its_size(measured):
    assert _moved(measured, "kept", "retained") == pytest.approx(PLANTED, rel=0.05)
    assert abs(_moved(measured, "kept", "code_pages")) < 0.05 * PLANTED
    # the footprint is built on what the framework keeps
    assert _moved(measured, "kept", "footprint") == pytest.approx(PLANTED, rel=0.05)


def test_a_steady_step_pages_in_no_code(measured):
    # the steady steps re-read pages already resident: nothing paged in inside them
    for name in measured:
        assert figures.value(measured[name], "step_code_pages") < 256 * 1024
