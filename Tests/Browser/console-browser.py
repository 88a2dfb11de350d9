#!/usr/bin/python3
"""Drives headless Chromium over the DevTools protocol for the console's browser tests.

Usage: console-browser.py CHROMIUM PLAN

PLAN is a JSON file: a list of steps, run in order in one browser tab; one JSON line is printed per step:
  {"open": URL}                                   loads URL and waits for the load event
  {"wait": EXPRESSION, "timeout": SECONDS}        evaluates EXPRESSION in the page until it is truthy
  {"eval": EXPRESSION}                            the value of EXPRESSION
  {"screenshot": PATH}                            saves the page as a PNG
A step that fails prints {"error": ...} and ends the run (exit status 1).
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Tab:
    def __init__(self, url):
        self.socket = websocket.create_connection(url, timeout=30)
        self.next_id = 0
        self.events = []

    def call(self, method, params=None):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message.get("method"))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")


def main():
    chromium = sys.argv[1]
    with open(sys.argv[2]) as file:
        plan = json.load(file)
    profile = tempfile.mkdtemp(prefix="console-browser-")
    # Chromium's own temporary files (its profile's singleton socket, which a terminated Chromium leaves behind)
    # go under the profile, which goes at the end.
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=profile))
    status = 0
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or browser.poll() is not None:
                raise RuntimeError("Chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = open(port_file).read().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        tab = Tab(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        tab.call("Page.enable")
        for step in plan:
            try:
                if "open" in step:
                    tab.call("Page.navigate", {"url": step["open"]})
                    deadline = time.monotonic() + 30
                    while tab.evaluate("document.readyState") != "complete":
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"{step['open']} did not load")
                        time.sleep(0.1)
                    result = {"open": step["open"], "url": tab.evaluate("location.href")}
                elif "wait" in step:
                    deadline = time.monotonic() + step.get("timeout", 30)
                    value = None
                    while True:
                        value = tab.evaluate(step["wait"])
                        if value or time.monotonic() > deadline:
                            break
                        time.sleep(0.25)
                    if not value:
                        raise RuntimeError(f"not true within {step.get('timeout', 30)} s: {step['wait']}")
                    result = {"wait": step["wait"], "value": value}
                elif "eval" in step:
                    result = {"eval": step["eval"], "value": tab.evaluate(step["eval"])}
                elif "screenshot" in step:
                    shot = tab.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
                    with open(step["screenshot"], "wb") as out:
                        out.write(base64.b64decode(shot["data"]))
                    result = {"screenshot": step["screenshot"]}
                else:
                    raise RuntimeError(f"unknown step {step}")
            except Exception as error:  # noqa: BLE001 - every failure is reported as the step's result
                try:
                    shown = tab.evaluate("document.body ? document.body.innerText.slice(0, 2000) : ''")
                except Exception:  # noqa: BLE001 - the page itself may be what failed
                    shown = None
                print(json.dumps({"error": str(error), "step": step, "page": shown}), flush=True)
                status = 1
                break
            print(json.dumps(result), flush=True)
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
