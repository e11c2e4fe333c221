"""An upstream for the proxy's streaming tests (test code, 127.0.0.1 only).

Serves what `stagger serve` does not: Server-Sent Events paced by the test,
a chunked body, a large body. Prints "listening on http://127.0.0.1:PORT"
first (the format tests/integration/lib.sh's listen_port reads).

  GET /sse?flag=PATH   event 1, then waits (up to 30 s) for the file PATH
                       to exist, then event 2 and the end; the stream is
                       chunked. If the wait timed out, event 2 says so.
  GET /chunked         three chunks, Transfer-Encoding: chunked
  GET /big?n=N         N bytes (byte i is i % 251) with Content-Length,
                       written 64 KiB at a time
  GET /status?code=C&n=N[&retry_after=S][&chunked=1]
                       status C with N such bytes (chunked, or with a
                       Content-Length), and Retry-After: S if given
  GET /flaky?key=K&n=N the first request of key K: a 503 (Retry-After: 0)
                       whose N bytes are all "x"; every later one: a 500
                       with N bytes i % 251
  GET /redirect?to=URL a 302 to URL, "{self}" in it replaced by this
                       server's http://127.0.0.1:PORT
  GET /landed          200 "landed"
  POST /hold?flag=PATH reads the body, waits (up to 30 s) for the file PATH
                       to exist, then 200 "held N" (N: the body's length)
  POST /once503?key=K  reads the body; the first POST of key K: a 503
                       (Retry-After: 0), every later one: 200 "got N"
A leading /v2 is ignored (the tests route a proxy prefix onto it).
"""
import http.server, os, socketserver, sys, time, urllib.parse


seen = set()


def pattern(n):
    """n bytes, byte i being i % 251."""
    period = bytes(range(251))
    return (period * (n // 251 + 1))[:n]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def body(self, code, data, headers=(), chunked=False):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for i in range(0, len(data), 65536):
                if chunked:
                    self.chunk(data[i:i + 65536])
                else:
                    self.wfile.write(data[i:i + 65536])
            if chunked:
                self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        path = u.path[3:] if u.path.startswith("/v2/") else u.path
        if path == "/status":
            n = int(q["n"][0])
            hdrs = [("Retry-After", q["retry_after"][0])] if "retry_after" in q else []
            self.body(int(q["code"][0]), pattern(n), hdrs, q.get("chunked") == ["1"])
        elif path == "/flaky":
            key, n = q["key"][0], int(q["n"][0])
            if key not in seen:
                seen.add(key)
                self.body(503, b"x" * n, [("Retry-After", "0")])
            else:
                self.body(500, pattern(n))
        elif path == "/redirect":
            to = q["to"][0].replace("{self}", "http://127.0.0.1:%d" % srv.server_address[1])
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/landed":
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"landed")
        elif u.path == "/sse":
            flag = q["flag"][0]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b"data: one\n\n")
            waited = "ok"
            for _ in range(3000):
                if os.path.exists(flag):
                    break
                time.sleep(0.01)
            else:
                waited = "timeout"
            self.chunk(b"data: two " + waited.encode() + b"\n\n")
            self.chunk(b"")
        elif u.path == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"alpha ", b"beta ", b"gamma"):
                self.chunk(part)
            self.chunk(b"")
        elif u.path == "/big":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = bytes(i % 251 for i in range(251 * 262))  # 65762 bytes, whole periods
            sent = 0
            try:
                while sent < n:
                    k = min(len(block), n - sent)
                    self.wfile.write(block[:k])
                    sent += k
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


def _post(self):
    u = urllib.parse.urlparse(self.path)
    q = urllib.parse.parse_qs(u.query)
    data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
    if u.path == "/hold":
        for _ in range(3000):
            if os.path.exists(q["flag"][0]):
                break
            time.sleep(0.01)
        self.body(200, b"held %d" % len(data))
    elif u.path == "/once503":
        key = q["key"][0]
        if key not in seen:
            seen.add(key)
            self.body(503, b"again", [("Retry-After", "0")])
        else:
            self.body(200, b"got %d" % len(data))
    else:
        self.body(404, b"")


H.do_POST = _post


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
