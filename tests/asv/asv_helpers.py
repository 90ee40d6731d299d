"""Running asv from tests: a private machine file, temporary results, this suite.

Every asv call here gets HOME set to a temporary directory holding a machine file
written by tools/asv_machine.py (so the user's ~/.asv-machine.json is never touched)
and a config derived from the project's asv.conf.json with absolute paths, results
and site in temporary directories (so the committed results/ are never touched).
"""

import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
ASV = str(Path(sys.executable).with_name("asv"))
MACHINE = "gradmem-test"


def project_config():
    from asv import util

    return util.load_json(str(PROJECT / "asv.conf.json"), js_comments=True)


def write_config(tmp, repo, benchmark_dir=PROJECT / "benchmarks", **overrides):
    """A config file in `tmp` for `repo`, results/html/env under `tmp`."""
    config = project_config()
    config.update(
        repo=str(repo), benchmark_dir=str(benchmark_dir),
        results_dir=str(tmp / "results"), html_dir=str(tmp / "html"), env_dir=str(tmp / "env"),
    )
    config.update(overrides)
    path = tmp / "asv.conf.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def machine_home(tmp):
    """A HOME whose ~/.asv-machine.json knows MACHINE, written by the project's tool."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    subprocess.run([PYTHON, str(PROJECT / "tools" / "asv_machine.py"), "--machine", MACHINE,
                    "--path", str(home / ".asv-machine.json")], check=True, capture_output=True)
    return home


def environ(home, **variables):
    env = dict(os.environ, HOME=str(home), **variables)
    for name in [n for n in env if n.startswith("GRADMEM_ASV_") and n not in variables]:
        del env[name]  # only what the test asks for
    return env


def run(args, env, cwd, timeout=600):
    """Run asv; return (CompletedProcess, wall seconds)."""
    start = time.monotonic()
    done = subprocess.run([ASV, *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - start


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def installed_env_name(python=PYTHON):
    """The name `-E installed:<python>` results get (harness/asv_env.py): versions only."""
    from harness.asv_env import env_name, installed_versions, with_framework_pins

    found = installed_versions(python, with_framework_pins(project_config()["matrix"]["req"]))
    return env_name(found["python"], found["versions"])


def result_file_name(commit, env_name):
    """The file asv stores a commit's results in: `<commit[:8]>-<env name>.json`, or
    `<commit[:8]>-env-<md5 of the name>.json` once the name reaches 128 characters
    (asv.results.get_filename; the nine frameworks' versions make it ~190)."""
    from asv.results import get_filename

    return os.path.basename(get_filename(MACHINE, commit, env_name))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory):
    """A static HTTP server for `directory` on 127.0.0.1; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def result_files(results_dir, machine=MACHINE):
    folder = Path(results_dir) / machine
    return sorted(p for p in folder.glob("*.json") if p.name != "machine.json")


def committed_result_files(results_dir=PROJECT / "results"):
    """The result files of every machine under `results_dir`: the JSON files of folders
    that hold a machine.json (results/ also holds other histories' folders, e.g. an asv
    run over another repository's commits with its own benchmarks.json)."""
    return sorted(p for machine in Path(results_dir).glob("*/machine.json")
                  for p in machine.parent.glob("*.json") if p.name != "machine.json")
