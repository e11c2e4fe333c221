#!/usr/bin/env python3
"""Drive a stagger page in headless Chromium through chromedriver's
WebDriver HTTP API (python3's urllib only; no npm, no selenium) and check it
(issue #36's proof):

  page_probe.py URL SHOT.png [--live] [--expect ID=LABEL,...]

- Chromium runs with --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE
  127.0.0.1": no name but loopback resolves, so anything fetched from the
  network would fail; then every resource the page loaded must be its own
  (same origin, or the file itself) and none may have failed (the
  performance log's Network.loadingFailed);
- every chart (window.staggerCharts) draws: its canvas has painted pixels
  and its series are named; --expect ID=LABEL asks chart ID for a series
  whose name contains LABEL;
- --live: the page polls (window.staggerPolls grows) and its charts move:
  between two looks the points grew and some series' values changed, and
  the batch part, when there is one, moved on;
- a screenshot goes to SHOT.png.
Prints what it saw as JSON; exit 0 when all holds, 1 (with the reason)
otherwise. Every wait is bounded by an event (a poll, a load), with a hang
guard of 30 s.
"""
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Driver:
    def __init__(self, chromium, chromedriver, profile):
        self.port = free_port()
        self.proc = subprocess.Popen([chromedriver, "--port=%d" % self.port],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = "http://127.0.0.1:%d" % self.port
        for _ in range(300):
            try:
                self.call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"performance": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,1100",
                         "--user-data-dir=" + profile,
                         "--no-first-run", "--disable-background-networking",
                         "--disable-component-update", "--disable-sync",
                         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
                "perfLoggingPrefs": {"enableNetwork": True, "enablePage": False},
            }}}}
        self.sid = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["value"]

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.sid, path), body)

    def js(self, script):
        return self.s("POST", "/execute/sync", {"script": script, "args": []})

    def close(self):
        try:
            self.call("DELETE", "/session/" + self.sid)
        finally:
            self.proc.terminate()
            self.proc.wait(10)


# What the page shows, read in the page: per chart its series and how much
# of its canvas is painted; the batch part's text; the resources it loaded.
LOOK = r"""
const out = {polls: window.staggerPolls || 0, charts: {}, resources: [], batch: null};
for (const [k, c] of Object.entries(window.staggerCharts || {})) {
  const cv = c.canvas, g = cv.getContext("2d");
  const px = g.getImageData(0, 0, cv.width, cv.height).data;
  let painted = 0;
  for (let i = 3; i < px.length; i += 16) if (px[i] > 0) painted++;
  out.charts[cv.id || k] = {painted, width: cv.width, height: cv.height, points: c.data.labels.length,
    series: c.data.datasets.map(d => ({label: d.label, data: d.data}))};
}
for (const e of performance.getEntriesByType("resource")) out.resources.push(e.name);
const b = document.getElementById("eta");
if (b) out.batch = b.textContent;
out.href = location.href;
return out;
"""


def fail(msg, seen=None):
    if seen is not None:
        print(json.dumps(seen, indent=1)[:4000])
    print("page_probe: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    url, shot = args[0], args[1]
    live = "--live" in args
    expect = []
    if "--expect" in args:
        for kv in args[args.index("--expect") + 1].split(","):
            cid, label = kv.split("=", 1)
            expect.append((cid, label))
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    chromedriver = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
    profile = tempfile.mkdtemp(prefix="stg_chromium.")
    d = Driver(chromium, chromedriver, profile)
    try:
        # What the browser loaded on its own at start (its new-tab page)
        # is not the page's: reading the log empties it.
        d.s("POST", "/url", {"url": "about:blank"})
        d.s("POST", "/se/log", {"type": "performance"})
        d.s("POST", "/url", {"url": url})
        deadline = time.time() + 30
        first = None
        while time.time() < deadline:
            seen = d.js(LOOK)
            if not live:
                if seen["charts"] and all(c["painted"] > 0 for c in seen["charts"].values()):
                    break
            elif seen["polls"] >= 3 and first is None:
                first = seen
            elif first and seen["polls"] >= first["polls"] + 3:
                break
            time.sleep(0.2)
        else:
            fail("the page never got there (polls, drawing)", seen)
        png = base64.b64decode(d.s("GET", "/screenshot"))
        with open(shot, "wb") as f:
            f.write(png)
        perf = d.s("POST", "/se/log", {"type": "performance"})
    finally:
        d.close()
    # Nothing from elsewhere, nothing failed.
    origin = url.split("/", 3)[:3]
    own = "/".join(origin) if url.startswith("http") else "file://"
    foreign = [r for r in seen["resources"] if not r.startswith(own)]
    if not url.startswith("http"):
        own = "file://"  # a file: nothing over the network at all
        foreign = [r for r in seen["resources"] if r.startswith(("http:", "https:"))]
    failed = []
    requested = []
    by_id = {}
    for e in perf:
        m = json.loads(e["message"])["message"]
        if m["method"] == "Network.requestWillBeSent":
            requested.append(m["params"]["request"]["url"])
            by_id[m["params"]["requestId"]] = m["params"]["request"]["url"]
        elif m["method"] == "Network.loadingFailed":
            failed.append("%s: %s" % (by_id.get(m["params"]["requestId"], "?"),
                                      m["params"].get("errorText")))
    # What can leave the machine: http(s) and web sockets (chrome:// and
    # data: are the browser's own; its new-tab page loads some at start).
    net = ("http:", "https:", "ws:", "wss:", "ftp:")
    foreign += [r for r in requested if r.startswith(net) and not r.startswith(own)]
    seen["requested"] = requested
    if foreign:
        fail("loads from elsewhere: %s" % foreign, seen)
    if failed:
        fail("failed loads: %s" % failed, seen)
    if not seen["charts"]:
        fail("no chart on the page", seen)
    for cid, c in seen["charts"].items():
        if c["painted"] == 0 or not c["series"]:
            fail("chart %s draws nothing (painted %d, %d series)" % (cid, c["painted"], len(c["series"])), seen)
    for cid, label in expect:
        c = seen["charts"].get(cid)
        if not c or not any(label in s["label"] for s in c["series"]):
            fail("chart %s has no series named like %r" % (cid, label), seen)
    if live:
        # New points, and among them values that are not zero: the rates
        # drawn are those of the work going on between the two looks.
        grew = all(seen["charts"][k]["points"] > first["charts"][k]["points"] for k in seen["charts"])
        moved = any(v for k in seen["charts"] for s in seen["charts"][k]["series"]
                    for v in s["data"][first["charts"][k]["points"]:])
        if not (grew and moved):
            fail("the charts did not move between two looks", seen)
        if first.get("batch") and first["batch"] == seen["batch"]:
            fail("the batch progress did not move: %r" % seen["batch"], seen)
        seen["first_batch"] = first.get("batch")
    for c in seen["charts"].values():
        for s in c["series"]:
            s["data"] = s["data"][-5:]
    print(json.dumps(seen, indent=1))


main()
