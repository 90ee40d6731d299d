"""Open a page in headless Chromium and report what the browser saw.

Talks the DevTools protocol over `--remote-debugging-pipe` (JSON messages ending in
NUL on file descriptors 3 and 4): no websocket library, no port to collide on, and
every console message, uncaught exception and failed load arrives as a typed event
instead of being scraped from log text.
"""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# An offline browser: no host name resolves, so only URLs by IP (the test's own
# 127.0.0.1 server) can load; anything fetched from the internet fails and shows up.
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-proxy-server")


class Browser:
    def __init__(self, executable, width=1400, height=1000, timeout=60, flags=()):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="gradmem-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4.
        os.set_inheritable(to_browser_r, True)
        os.set_inheritable(from_browser_w, True)

        def wire_fds():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, *flags, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=wire_fds, close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply from Chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], remaining)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    err = self.process.stderr.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"Chromium closed the pipe; stderr tail:\n{err}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None):
        """Send a command and return its result; events seen meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, session, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def close(self):
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


def problems(events):
    """Console errors/warnings, uncaught exceptions and browser log errors, as text."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            found.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            entry = params["entry"]
            found.append(f"log {entry['level']} ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return found


def requests(events):
    """URLs the page asked for, in order."""
    return [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"
            and not e["params"]["request"]["url"].startswith("data:")]


def inspect_page(url, expression, screenshot=None, executable=None, flags=(), await_promise=False,
                 full_page=True):
    """Load `url`, evaluate `expression` (its value is returned; with await_promise, the
    value its promise resolves to), collect problems and the URLs requested.

    Returns {"value": ..., "problems": [...], "requests": [...]} and writes a PNG to
    `screenshot` (the whole page, or with full_page=False the window only: capturing
    beyond the viewport resizes it, and a page may react to the resize).
    """
    browser = Browser(executable or find_chromium(), flags=flags)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        result = browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise}, session=session
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"expression failed: {result['exceptionDetails']}")
        if screenshot:
            shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full_page},
                                session=session)
            with open(screenshot, "wb") as out:
                out.write(base64.b64decode(shot["data"]))
        # Let late console messages (timers, image decode errors) arrive before judging.
        browser.send("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 200))",
                                          "awaitPromise": True}, session=session)
        return {"value": result.get("result", {}).get("value"), "problems": problems(browser.events),
                "requests": requests(browser.events)}
    finally:
        browser.close()
