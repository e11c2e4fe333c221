"""An LLM-like streaming upstream for test_proxy_sse_first.sh (test code,
127.0.0.1 only). Prints "listening on http://127.0.0.1:PORT" first, and
appends "PATH N" to the log file argv[1] for every request (N counts the
requests of PATH), so the test knows exactly what was sent.

  POST /over?k=K     Anthropic-style: the first K requests answer 200 and
                     then `event: error` overloaded_error as their first
                     event; later ones a whole stream (message_start, three
                     text deltas a little apart, message_stop)
  POST /oai?k=K      OpenAI-style: the first K answer 200 and then
                     `data: {"error": {... "code": "rate_limit_exceeded"}}`;
                     later ones three chunks and `data: [DONE]`
  POST /mid          message_start first, then an overloaded error event:
                     a failure inside a stream that already began
  POST /always       every request: the overloaded error event first
  POST /slowfirst    a comment (": keep-alive") first, then message_start
                     after 0.3 s, then the stream: held until the event
"""
import http.server, json, socketserver, sys, threading, time, urllib.parse

LOG = sys.argv[1]
lock = threading.Lock()
counts = {}

OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
OAI_ERROR = {"error": {"message": "Rate limit reached for requests", "type": "requests",
                       "param": None, "code": "rate_limit_exceeded"}}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, name, obj):
        head = b"event: %s\n" % name.encode() if name else b""
        self.chunk(head + b"data: " + json.dumps(obj).encode() + b"\n\n")

    def start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Upstream-Header", "kept")
        self.end_headers()

    def anthropic_stream(self):
        self.event("message_start", {"type": "message_start", "message": {"id": "msg_1"}})
        for w in ("Hello", " stream", " world"):
            time.sleep(0.05)
            self.event("content_block_delta",
                       {"type": "content_block_delta", "delta": {"type": "text_delta", "text": w}})
        self.event("message_stop", {"type": "message_stop"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        with lock:
            counts[u.path] = counts.get(u.path, 0) + 1
            c = counts[u.path]
            with open(LOG, "a") as f:
                f.write("%s %d\n" % (u.path, c))
        k = int(q.get("k", ["0"])[0])
        try:
            self.start()
            if u.path == "/over":
                if c <= k:
                    self.event("error", OVERLOADED)
                else:
                    self.anthropic_stream()
            elif u.path == "/oai":
                if c <= k:
                    self.chunk(b"data: " + json.dumps(OAI_ERROR).encode() + b"\n\n")
                else:
                    for w in ("a", "b", "c"):
                        self.chunk(b"data: " + json.dumps(
                            {"id": "c1", "choices": [{"delta": {"content": w}}]}).encode() + b"\n\n")
                    self.chunk(b"data: [DONE]\n\n")
            elif u.path == "/mid":
                self.event("message_start", {"type": "message_start", "message": {"id": "msg_1"}})
                time.sleep(0.1)
                self.event("error", OVERLOADED)
            elif u.path == "/always":
                self.event("error", OVERLOADED)
            elif u.path == "/slowfirst":
                self.chunk(b": keep-alive\n\n")
                time.sleep(0.3)
                self.anthropic_stream()
            self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = S(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
