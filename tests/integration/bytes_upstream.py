"""An upstream whose answers test an export's formats (test code, 127.0.0.1 only).

  python3 bytes_upstream.py
Prints "listening on http://127.0.0.1:PORT" first (lib.sh's listen_port).

Answers GET:
  /text/N   200, a text body with a comma, a quote and a newline
  /bin/N    200, a binary body: NUL, then a comma, then bytes that are not UTF-8
  /gone/N   404, body "gone N"
"""
import http.server, sys


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        kind, _, n = self.path.strip("/").partition("/")
        if kind == "text":
            code, body = 200, ('text %s, "quoted"\nsecond line' % n).encode()
        elif kind == "bin":
            code, body = 200, b"\x00,bin" + n.encode() + b"\xff\xfe\x01"
        else:
            code, body = 404, ("gone %s" % n).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
