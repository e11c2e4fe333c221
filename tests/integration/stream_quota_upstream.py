#!/usr/bin/env python3
"""An upstream with a request quota whose first answer is a long SSE stream,
for test_proxy_cold_stream.sh (test code, 127.0.0.1 only).

A fixed window of --limit requests per --window seconds, the window starting
at the first arrival after the previous one ended. Every answer tells it in
the IETF draft-06 fields (RateLimit-Limit, RateLimit-Remaining,
RateLimit-Reset: whole seconds to the window's end, rounded up); an arrival
over the limit is refused (429, Retry-After) and not counted.

  POST /stream   200 text/event-stream: an event at once, then one every
                 0.1 s until --until requests of /quick have arrived (or
                 --secs passed, a hang guard: the stream only waits for them)
  GET  /quick    200, a short JSON body

The log (--log) gets "<seconds> <path> ok|refused" at each arrival and
"<seconds> /stream end" when a stream ends, in order. Prints
"listening on http://127.0.0.1:PORT" first.
"""
import argparse
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--limit", type=int, default=3)
ap.add_argument("--window", type=float, default=4.0)
ap.add_argument("--until", type=int, default=2)
ap.add_argument("--secs", type=float, default=20.0)
ap.add_argument("--log", required=True)
args = ap.parse_args()

lock = threading.Lock()
state = {"end": None, "used": 0, "quick": 0}
T0 = time.monotonic()


def log(line):
    with open(args.log, "a") as f:
        f.write("%.3f %s\n" % (time.monotonic() - T0, line))


def arrive(path):
    """Count an arrival: (admitted, remaining, reset seconds)."""
    with lock:
        now = time.monotonic()
        if state["end"] is None or now >= state["end"]:
            state["end"] = now + args.window
            state["used"] = 0
        ok = state["used"] < args.limit
        if ok:
            state["used"] += 1
        if path == "/quick":
            state["quick"] += 1
        log("%s %s" % (path, "ok" if ok else "refused"))
        return ok, args.limit - state["used"], max(1, math.ceil(state["end"] - now))


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def fields(self, remaining, reset):
        self.send_header("RateLimit-Limit", str(args.limit))
        self.send_header("RateLimit-Remaining", str(remaining))
        self.send_header("RateLimit-Reset", str(reset))

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def answer(self, path):
        ok, remaining, reset = arrive(path)
        if not ok:
            body = b'{"error": "rate limited"}'
            self.send_response(429)
            self.fields(0, reset)
            self.send_header("Retry-After", str(reset))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if path == "/quick":
            body = b'{"ok": true}'
            self.send_response(200)
            self.fields(remaining, reset)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.fields(remaining, reset)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        start = time.monotonic()
        i = 0
        while True:
            self.chunk(b'data: {"i": %d}\n\n' % i)
            i += 1
            with lock:
                enough = state["quick"] >= args.until
            if enough or time.monotonic() - start > args.secs:
                break
            time.sleep(0.1)
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")
        log("/stream end")

    def do_GET(self):
        self.answer(self.path.split("?")[0])

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.answer(self.path.split("?")[0])


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
