"""The asv history site inside the observatory: history/, published from the committed
asv results by tools/asv_site.py (asv publish, then its CDN scripts made local).

It needs asv (the `bench` extra) and the pinned scripts fetched at set-up (`make
setup`: tools/asv_site.py vendor, which needs npm once). Without them the site is
built without its history and the front page says why and what to run.
asv's page loads its data with requests that browsers refuse on file:// URLs, so the
history is seen over HTTP (any static host; `python -m http.server -d DIR` locally):
the front page says so where it links it, and the history's own page, opened from
disk, says so instead of asv's "check your internet connection" (tools/asv_site.py
explain_from_disk).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

FOLDER = "history"


def serve_note(out_dir):
    """How to open the history: the command that serves `out_dir` (as the reader named
    it) and the address, for the place the front page links it."""
    return (f"It opens over HTTP only (asv's page loads its data by script, which a browser refuses from "
            f"disk): on a static host it works as is; on this machine, python -m http.server -d {out_dir} "
            f"and open http://localhost:8000/{FOLDER}/")


def build(root, out_dir, assets, comparison=None, timeout=600):
    """Publish the history into out_dir/history. Returns (href or None, what to tell the reader)."""
    try:
        from asv import util
    except ImportError:
        return None, "Not built: asv is not installed (pip install 'gradmem[bench]', part of make setup)."
    if not os.path.exists(os.path.join(assets, ".manifest-sha256")):
        return None, (f"Not built: the history site's scripts are not in {assets} "
                      "(make setup runs python tools/asv_site.py vendor, which needs npm and the network once).")
    config = util.load_json(os.path.join(root, "asv.conf.json"), js_comments=True)
    target = os.path.join(os.path.abspath(out_dir), FOLDER)
    shutil.rmtree(target, ignore_errors=True)
    # The same configuration with absolute paths and the site's folder as asv's html_dir.
    for key in ("repo", "results_dir", "benchmark_dir", "env_dir"):
        config[key] = os.path.join(root, config[key])
    config["html_dir"] = target
    with tempfile.TemporaryDirectory(prefix="gradmem-site-asv-") as scratch:
        path = os.path.join(scratch, "asv.conf.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(config, handle)
        command = [sys.executable, os.path.join(root, "tools", "asv_site.py"), "publish", "--config", path,
                   "--assets", assets, "--serve-root", out_dir] + (["--comparison", comparison] if comparison else [])
        try:
            done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"Not built: tools/asv_site.py publish took over {timeout} s."
    if done.returncode != 0 or not os.path.exists(os.path.join(target, "index.html")):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"Not built: tools/asv_site.py publish failed ({done.returncode}): {tail[0]}"
    beside = ", with the comparison page of the CPU records beside it" if comparison else ""
    return f"{FOLDER}/index.html", ("every figure per commit of gradmem, from the asv results committed under "
                                    f"results/ (one series per machine) and the regressions asv finds{beside}.")
