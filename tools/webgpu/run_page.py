#!/usr/bin/env python3
"""Loads a page in headless Chromium (WebGPU on SwiftShader's Vulkan) and
prints what a JavaScript expression on it resolves to.

    run_page.py PAGE.html EXPRESSION [--timeout=SECONDS] [--screenshot=PNG] [--webgpu=off]
    run_page.py PAGE.html --serve=FUNCTION [--timeout=SECONDS] [--isolated=on]

Chromium is driven through the DevTools protocol over a pipe
(--remote-debugging-pipe: commands on its fd 3, replies on its fd 4, each a
JSON message ended by a NUL byte), so nothing beyond Python's standard
library is needed. The expression is evaluated once the page has loaded;
when it gives a promise, the result is what the promise resolves to (a
string is printed as it is, anything else as JSON). PAGE.html may end in a
query (?target=wasm). --webgpu=off starts Chromium without its WebGPU
flags, as a browser without WebGPU. --isolated=on serves the page's
directory over HTTP on 127.0.0.1 with the headers that make a page
cross-origin isolated (COOP same-origin, COEP require-corp), so it has
SharedArrayBuffer and shared WebAssembly memories (wasm with threads). The page's console
lines go to stderr. Exit status: 0 on success, 1 when the expression threw
or the page failed, 2 for a bad invocation, 3 when Chromium is missing, 4 on
timeout.

With --serve, the page stays open: each line read from stdin (a JSON value)
is passed to the page's FUNCTION, and what it resolves to is written as one
line to stdout, until stdin ends. The timeout then bounds each call.
"""

import base64
import functools
import http.server
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def chromium_path():
    explicit = os.environ.get("ACCY_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    def __init__(self, chromium, timeout, webgpu=True):
        self.deadline = time.monotonic() + timeout
        self.profile = tempfile.mkdtemp(prefix="accy-chromium-")
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def child_fds():
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        gpu = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"] if webgpu else ["--disable-webgpu"]
        args = [chromium, "--headless=new", "--no-sandbox", *gpu, "--allow-file-access-from-files",
                "--remote-debugging-pipe", "--no-first-run", "--disable-gpu-sandbox",
                f"--user-data-dir={self.profile}", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=child_fds,
                                     close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.cmd_w, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self):
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the page did not finish in time")
            ready, _, _ = select.select([self.res_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (it exited)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None):
        wanted = self.send(method, params, session)
        while True:
            message = self.receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self.on_event(message)

    def on_event(self, message):
        if message.get("method") == "Runtime.consoleAPICalled":
            args = message["params"].get("args", [])
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
            print(f"console: {text}", file=sys.stderr)
        elif message.get("method") == "Runtime.exceptionThrown":
            details = message["params"]["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            print(f"page exception: {text}", file=sys.stderr)

    def close(self):
        try:
            self.send("Browser.close")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class IsolatedHandler(http.server.SimpleHTTPRequestHandler):
    """Files of one directory, with the cross-origin isolation headers."""

    def end_headers(self):
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def guess_type(self, path):
        return "text/javascript" if str(path).endswith((".js", ".mjs")) else super().guess_type(path)

    def log_message(self, *args):
        pass


def serve_isolated(directory):
    """Starts a server of `directory` on a free port; returns (server, base URL)."""
    handler = functools.partial(IsolatedHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def main(argv):
    options = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv[1:] if a.startswith("--") and "=" in a}
    positional = [a for a in argv[1:] if not a.startswith("--")]
    if len(positional) != (1 if "--serve" in options else 2):
        print(__doc__, file=sys.stderr)
        return 2
    serve = options.get("--serve")
    if serve is not None:
        positional.append("")
    page, expression = positional
    page, query = (page.split("?", 1) + [""])[:2]
    if not os.path.exists(page):
        print(f"run_page: no page {page}", file=sys.stderr)
        return 2
    chromium = chromium_path()
    if chromium is None:
        print("run_page: Chromium not found (chromium on PATH, or ACCY_CHROMIUM)", file=sys.stderr)
        return 3
    browser = Browser(chromium, float(options.get("--timeout", "300")), options.get("--webgpu", "on") != "off")
    server = None
    url = "file://" + os.path.abspath(page)
    if options.get("--isolated") == "on":
        server, base = serve_isolated(os.path.dirname(os.path.abspath(page)))
        url = base + os.path.basename(page)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Runtime.enable", session=session)
        browser.call("Page.enable", session=session)
        browser.call("Page.navigate", {"url": url + ("?" + query if query else "")}, session=session)
        waiting = ("new Promise((resolve) => { if (document.readyState === 'complete') resolve(); "
                   "else addEventListener('load', () => resolve()); })")
        # Page.navigate returns before the new document exists: retry until
        # the page's own document answers.
        while True:
            ready = browser.call("Runtime.evaluate", {"expression": f"{waiting}.then(() => location.href)",
                                                      "awaitPromise": True, "returnByValue": True}, session=session)
            if ready.get("result", {}).get("value", "").startswith(url.split("://")[0] + "://"):
                break
            time.sleep(0.05)
        if serve is not None:
            timeout = float(options.get("--timeout", "300"))
            for line in sys.stdin:
                browser.deadline = time.monotonic() + timeout
                answer = browser.call("Runtime.evaluate", {"expression": f"{serve}({line.strip()})",
                                                           "awaitPromise": True, "returnByValue": True},
                                      session=session)
                if "exceptionDetails" in answer:
                    details = answer["exceptionDetails"]
                    text = details.get("exception", {}).get("description") or details.get("text")
                    value = "error the page threw: " + str(text).replace("\n", " ")
                else:
                    value = str(answer.get("result", {}).get("value"))
                sys.stdout.write(value.replace("\n", " ") + "\n")
                sys.stdout.flush()
            return 0
        result = browser.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                   "returnByValue": True}, session=session)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            print(f"run_page: the expression threw: {text}", file=sys.stderr)
            return 1
        if "--screenshot" in options:
            shot = browser.call("Page.captureScreenshot", {"format": "png"}, session=session)
            with open(options["--screenshot"], "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        value = result.get("result", {}).get("value")
        sys.stdout.write(value if isinstance(value, str) else json.dumps(value))
        sys.stdout.write("\n")
        return 0
    except TimeoutError as e:
        print(f"run_page: {e}", file=sys.stderr)
        return 4
    except RuntimeError as e:
        print(f"run_page: {e}", file=sys.stderr)
        return 1
    finally:
        browser.close()
        if server is not None:
            server.shutdown()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
