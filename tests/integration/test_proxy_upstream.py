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
"""
import http.server, os, socketserver, sys, time, urllib.parse


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/sse":
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


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
