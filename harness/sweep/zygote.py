"""Workers forked from a process that has already imported their framework.

Importing a framework is most of what a short pass costs (seconds for TensorFlow and
torch in a fresh worker: docs/measurement.md, "How a worker starts"), and a sweep
starts two workers per cell. With `--start fork` (the default) the
parent keeps one *zygote* per framework and worker environment: a process started
exactly as a worker would be (same interpreter, same environment: allocator settings,
thread counts), which imports the adapter's `preload` modules and then only forks.
Each pass is still a process of its own: a fresh address space, its own session and
process group, stdin/stdout/stderr as a spawned worker has them, running the same
``worker.main``. What it does not repeat is the import: it starts where a spawned
worker stands after its imports, before `load()`, the runtime warm-up and the baseline.

A zygote only imports: no framework's runtime, thread pool or device has started, so
the fork copies a process with nothing in flight. It checks that (the number of its
threads before and after the preload); where a preload started threads, or failed,
the zygote tells the pool why (`Zygote.failed`; not yet in the record) and the pool
spawns that framework's workers as before.

Protocol (a SOCK_SEQPACKET socket pair; one JSON object per message):
- zygote -> parent, once: {"ready": {"modules": [...], "import_s": s, "file_pages": n}} or
  {"failed": reason}
- parent -> zygote: {"fork": [job, result]} with two file descriptors (the worker's
  stdin and its log, which becomes stdout and stderr); reply {"forked": pid}
- zygote -> parent, when a worker has exited: {"exited": pid, "returncode": rc} (rc
  as subprocess gives it: negative for a signal). The worker stays a zombie
  (waitid WNOWAIT) until the parent, having killed its process group, sends
  {"reap": pid} (answered {"reaped": pid}): its PID cannot be reused meanwhile
  (worker_process.py does the same).
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

from harness import interrupts

STARTS = ("fork", "spawn")
MESSAGE_BYTES = 65536
READY_TIMEOUT_S = 300.0  # a zygote's imports (TensorFlow under load: ~20 s)


# ---- the zygote (its own process) ------------------------------------------------------------
def serve(sock, framework, parent_pid):
    from harness.measure import worker

    worker.end_with_parent(parent_pid)
    ready = _preload(framework)
    if "ready" in ready:
        file_pages = resident_file_pages()  # what each worker maps again (below)
        ready["ready"]["file_pages"] = sum(length for _, length in file_pages) // PAGE
    _send(sock, ready)
    if "failed" in ready:
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select() through the fd below
    signal.set_wakeup_fd(wake_w)
    live = {}  # pid -> reported its exit
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        if sock in readable:
            message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 2)
            if not message:
                return  # the parent is done with us
            request = json.loads(message)
            if "fork" in request:
                pid = _fork(request["fork"], fds, [sock.fileno(), wake_r, wake_w], file_pages)
                live[pid] = False
                _send(sock, {"forked": pid})
            elif "reap" in request:
                os.waitpid(request["reap"], 0)
                live.pop(request["reap"], None)
                _send(sock, {"reaped": request["reap"]})
        for pid, reported in list(live.items()):
            if not reported:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is not None:
                    live[pid] = True
                    code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                    _send(sock, {"exited": pid, "returncode": code})


def _preload(framework):
    """Import the adapter's `preload` modules; {"ready": ...} or {"failed": reason}."""
    try:
        import numpy  # noqa: F401 - every adapter's; its BLAS pool's threads are counted before

        from harness import frameworks

        adapter = frameworks.get(framework)
        modules = list((adapter.module,) if adapter.preload is None else adapter.preload)
        before = _threads()
        started = time.perf_counter()
        for name in modules:
            __import__(name)
        import_s = time.perf_counter() - started
    except BaseException as err:  # noqa: BLE001 - the pool spawns instead, saying why
        return {"failed": f"preloading {framework} failed: {type(err).__name__}: {err}"}
    if not modules:
        return {"failed": f"the {framework} adapter names no modules to preload"}
    if _threads() != before:
        return {"failed": f"importing {', '.join(modules)} started {_threads() - before} thread(s): "
                          "a fork would copy a process with threads in flight"}
    return {"ready": {"modules": modules, "import_s": round(import_s, 4)}}


# ---- resident file pages -------------------------------------------------------------------
# fork() copies the page tables of anonymous memory but not of file-backed mappings (the
# kernel lets the child fault those in again): a forked child of a zygote with torch
# imported starts with 5 MiB of its file pages resident where the zygote has 77 MiB.
# Library code the imports ran and a step runs again would then be faulted in *during
# the step*, and counted in its figures (measured: retained bytes +0.5-4 MiB for torch,
# TensorFlow and JAX cells, first-step peaks up to +18 %). So the zygote notes which
# file-backed pages its imports made resident, and each forked worker maps exactly
# those again (MADV_POPULATE_READ: minor faults from the page cache) before anything
# else: it starts where a spawned worker stands after the same imports.
PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_READ = 22  # Linux >= 5.14


def resident_file_pages(pid="self"):
    """[(address, length)]: runs of file-backed pages present in `pid`'s page tables
    (/proc/PID/maps for the mappings, the present bit of /proc/PID/pagemap)."""
    import numpy as np

    runs = []
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps, \
            open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or fields[4] == "0" or not fields[1].startswith("r"):
                continue  # anonymous (copied by fork anyway) or unreadable
            start, end = (int(x, 16) for x in fields[0].split("-"))
            pagemap.seek(start // PAGE * 8)
            present = np.frombuffer(pagemap.read((end - start) // PAGE * 8), dtype=np.uint64) >> np.uint64(63)
            edges = np.flatnonzero(np.diff(np.concatenate(([0], present.astype(np.int8), [0]))))
            runs += [(start + int(a) * PAGE, int(b - a) * PAGE) for a, b in zip(edges[::2], edges[1::2])]
    return runs


def _map_file_pages(runs):
    """Make `runs` resident in this process's page tables again; False where the kernel
    cannot (before Linux 5.14), the worker then faults them in as it goes."""
    import ctypes

    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    ok = True
    for address, length in runs:
        ok &= madvise(address, length, MADV_POPULATE_READ) == 0
    return ok


def _threads():
    return len(os.listdir("/proc/self/task"))


def _fork(paths, fds, close, file_pages):
    stdin_fd, log_fd = fds
    sys.stdout.flush()
    sys.stderr.flush()
    zygote = os.getpid()
    pid = os.fork()
    if pid:
        os.close(stdin_fd)
        os.close(log_fd)
        return pid
    code = 1
    try:  # the worker: a process of its own, as worker_process.py spawns one
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for fd in (stdin_fd, log_fd, *close):
            os.close(fd)
        os.environ["GRADMEM_WORKER_START"] = "fork" if _map_file_pages(file_pages) else "fork (file pages not remapped)"
        from harness.measure import worker

        code = worker.main(list(paths), parent_pid=zygote)
    except BaseException:  # noqa: BLE001 - said in the worker's log; the parent classifies the exit
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _send(sock, message, fds=()):
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def main(argv=None):
    fd, framework, parent_pid = (sys.argv[1:] if argv is None else argv)
    sock = socket.socket(fileno=int(fd))
    try:
        serve(sock, framework, int(parent_pid))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # no teardown of the imported framework (worker.exit_now says why)


# ---- the parent's side -------------------------------------------------------------------------
class ZygoteError(RuntimeError):
    """A zygote died or answered out of turn: its workers are reported killed."""


class Zygote:
    """One zygote process: `fork()` workers, `poll()` for their exits, `reap()` them."""

    def __init__(self, framework, env, python, log_path):
        self.framework = framework
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with interrupts.deferred(), open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [python or sys.executable, "-m", "harness.sweep.zygote", str(theirs.fileno()), framework,
                 str(os.getpid())],
                env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
            interrupts.started(self.proc.pid)  # a signal kills it with the workers
        theirs.close()
        self.sock = ours
        self.exits = {}  # pid -> returncode, for exits not yet collected
        self.live = set()
        self.dead = False
        answer = self._receive(timeout=READY_TIMEOUT_S)
        self.ready = answer.get("ready")
        self.failed = answer.get("failed") if self.ready is None else None

    def fork(self, job_path, result_path, stdin_fd, log_fd):
        """Start a worker; its PID."""
        _send(self.sock, {"fork": [job_path, result_path]}, [stdin_fd, log_fd])
        while True:
            answer = self._receive(timeout=READY_TIMEOUT_S)
            if "forked" in answer:
                self.live.add(answer["forked"])
                return answer["forked"]

    def poll(self):
        """Collect the exits the zygote has reported (without waiting). A zygote that
        died (killed with the workers by a signal's handler, or crashed) took its
        workers with it: they are reported killed, never an exception here."""
        while not self.dead:
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return
            try:
                self._receive(timeout=0)
            except ZygoteError:
                return

    def reap(self, pid):
        """Have the zygote reap an exited worker (its group has been killed) and wait
        until it has: then its PID and process group are gone, as after Popen.wait()."""
        if not self.dead:
            try:
                _send(self.sock, {"reap": pid})
                while self._receive(timeout=READY_TIMEOUT_S).get("reaped") != pid:
                    pass
            except (OSError, ZygoteError):  # it died meanwhile: its children went with it
                self._died("closed")
        self.live.discard(pid)
        return self.exits.pop(pid, None)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.sock.close()  # the zygote leaves when it reads the end
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.sock.close()
        interrupts.ended(self.proc.pid)

    def _receive(self, timeout):
        readable, _, _ = select.select([self.sock], [], [], timeout)
        data = self.sock.recv(MESSAGE_BYTES) if readable else None
        if not data:
            self._died("no answer" if data is None else "closed")
            raise ZygoteError(f"the {self.framework} zygote {'did not answer' if data is None else 'ended'}")
        message = json.loads(data)
        if "exited" in message:
            self.exits[message["exited"]] = message["returncode"]
        return message

    def _died(self, _why):
        """Its workers die with it (their parent-death signal): report them killed."""
        self.dead = True
        for pid in self.live:
            self.exits.setdefault(pid, -signal.SIGKILL)


class ForkedProcess:
    """A worker forked by a zygote, with the face runner.WorkerProcess uses of a Popen."""

    def __init__(self, zygote, job_path, result_path, log, gated):
        self.zygote = zygote
        stdin_r, stdin_w = os.pipe() if gated else (os.open(os.devnull, os.O_RDONLY), None)
        try:
            self.pid = zygote.fork(job_path, result_path, stdin_r, log.fileno())
        finally:
            os.close(stdin_r)
        self.stdin = os.fdopen(stdin_w, "wb", buffering=0) if stdin_w is not None else None
        self.returncode = None

    def exited(self):
        self.zygote.poll()
        return self.pid in self.zygote.exits

    def wait(self):
        """Reap (after the group was killed): wait for the zygote's word, then reap."""
        deadline = time.monotonic() + 30
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.returncode = self.zygote.reap(self.pid)
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        return self.returncode


class ZygotePool:
    """The zygotes of one sweep, one per (framework, environment), made on first use.
    Where it gives no zygote (no preload, a failed one, a pinned version's interpreter,
    `start="spawn"`) the worker is spawned as before."""

    def __init__(self, workdir, start="fork"):
        if start not in STARTS:
            raise ValueError(f"unknown start {start!r}; valid: {', '.join(STARTS)}")
        self.workdir, self.start = workdir, start
        self.zygotes = {}  # key -> Zygote (a failed one is kept, so it is not retried)

    def zygote_for(self, job, env, python):
        """The live zygote for this job's worker (started now if need be), or None."""
        cell = job.get("cell") or {}
        framework = "reference" if job.get("kind") == "reference_gradient" else cell.get("framework", job.get("framework"))
        if self.start != "fork" or not framework or python is not None:
            return None  # a pinned version's interpreter: spawned (its zygote would serve one cell)
        key = (framework, tuple(sorted(env.items())))
        zygote = self.zygotes.get(key)
        if zygote is None or zygote.dead:
            log_path = os.path.join(self.workdir, f"zygote-{framework}-{len(self.zygotes)}.log")
            try:
                zygote = self.zygotes[key] = Zygote(framework, env, python, log_path)
            except ZygoteError:
                return None
        return None if zygote.failed or zygote.dead else zygote

    def fork(self, zygote, job_path, result_path, log, gated):
        """A ForkedProcess, or None when the zygote could not fork (spawn instead)."""
        try:
            return ForkedProcess(zygote, job_path, result_path, log, gated)
        except (ZygoteError, OSError):
            return None

    def close(self):
        for zygote in self.zygotes.values():
            zygote.close()
        self.zygotes.clear()


if __name__ == "__main__":
    main()
