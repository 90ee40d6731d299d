"""Phase marks a worker leaves behind, for the timeline and for post-mortems.

Each mark is one JSON line ``{"t": <CLOCK_MONOTONIC seconds>, "mark": name}``
appended and flushed to a file the parent chose. CLOCK_MONOTONIC is one clock for the
whole machine, so the parent lines the marks up with the RSS samples it took of the
worker from outside; and when a worker dies (memory limit, timeout, crash), its last
mark says in which phase.
"""

import json
import os
import time

# ---- TEST ONLY ------------------------------------------------------------------------
# GRADMEM_TEST_PLANT="<fault>:<mark>" makes a worker misbehave when it reaches <mark>,
# so tests can plant the failures a sweep must survive: "hang" (sleeps forever: the
# parent's --timeout must kill it), "error" (raises), "crash" (SIGABRT, no Python
# traceback). Never set it outside tests/measure.
PLANT_VAR = "GRADMEM_TEST_PLANT"


def _planted_fault(name):
    plant = os.environ.get(PLANT_VAR, "")
    if not plant:
        return
    fault, _, where = plant.partition(":")
    if where != name:
        return
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "error":
        raise RuntimeError(f"planted error at {name} ({PLANT_VAR})")
    if fault == "crash":
        os.abort()


# ---------------------------------------------------------------------------------------


class Marks:
    def __init__(self, path=None):
        self.path = path
        self.items = []
        self._handle = open(path, "a", encoding="utf-8") if path else None

    def mark(self, name):
        t = time.monotonic()
        self.items.append((t, name))
        if self._handle is not None:
            self._handle.write(json.dumps({"t": t, "mark": name}) + "\n")
            self._handle.flush()
        _planted_fault(name)
        return t

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def read_marks(path):
    """[(t, name)] from a marks file; a torn last line (the worker died mid-write) is
    skipped."""
    found = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    item = json.loads(line)
                    found.append((float(item["t"]), str(item["mark"])))
                except (ValueError, KeyError, TypeError):
                    continue
    except FileNotFoundError:
        pass
    return found
