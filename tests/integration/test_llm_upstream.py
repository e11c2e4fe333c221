"""An LLM-like upstream for the proxy's refusal and timeout tests (test code,
127.0.0.1 only). Threaded: a slow answer never holds up another request.
Prints "listening on http://127.0.0.1:PORT" first (lib.sh's listen_port).

  POST /refuse?key=K&code=C&n=N[&retry_after=S][&should_retry=false]
        the first N requests of key K answer C (429 with OpenAI's
        rate_limit_exceeded body, 529 with Anthropic's overloaded_error
        body, any other code with a JSON error), with Retry-After: S if
        given and x-should-retry: false if asked; then 200
        {"ok":true,"key":K,"seen":M}. The request body is read first.
  GET  /count?key=K        how many requests key K has had (text); every
        path below counts its requests by key=K too
  GET|POST /slow?after=S   {"done":true,"after":S} after S seconds, with a
        Content-Length (a completion that is not streamed: its head comes
        with the whole answer)
  GET|POST /sse?secs=T&every=E
        Server-Sent Events, chunked: 200 and its head at once, then
        `data: {"i":I,"pad":"..."}` every E seconds for T seconds, then
        `data: [DONE]`; the events are numbered from 0 so the reader can
        check none is missing
  GET|POST /stall?events=N
        an SSE head and N events at once, then nothing, the connection held
        open (until the client goes or 10 minutes pass)
  GET|POST /hang   reads the request and never answers (10 minutes)
"""
import http.server, json, socketserver, sys, threading, time, urllib.parse

counts = {}
lock = threading.Lock()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)

    def json(self, code, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def sse_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def hold(self, secs):
        """Wait without answering; end early when the client goes."""
        end = time.time() + secs
        self.connection.settimeout(0.5)
        while time.time() < end:
            try:
                if self.connection.recv(1) == b"":
                    return
            except OSError as e:
                if "timed out" not in str(e):
                    return

    def handle_any(self):
        u = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        path = u.path
        self.read_body()
        if path != "/count" and "key" in q and path != "/refuse":
            with lock:
                counts[q["key"]] = counts.get(q["key"], 0) + 1
        if path == "/refuse":
            key = q.get("key", "")
            with lock:
                counts[key] = counts.get(key, 0) + 1
                seen = counts[key]
            code = int(q.get("code", "429"))
            if seen <= int(q.get("n", "1")):
                hdrs = []
                if "retry_after" in q:
                    hdrs.append(("Retry-After", q["retry_after"]))
                if q.get("should_retry") == "false":
                    hdrs.append(("x-should-retry", "false"))
                if code == 529:
                    body = {"type": "error",
                            "error": {"type": "overloaded_error", "message": "Overloaded"}}
                elif code == 429:
                    body = {"error": {"message": "Rate limit reached for requests",
                                      "type": "requests", "code": "rate_limit_exceeded"}}
                else:
                    body = {"error": {"message": "failed", "code": code}}
                return self.json(code, body, hdrs)
            return self.json(200, {"ok": True, "key": key, "seen": seen})
        if path == "/count":
            with lock:
                data = str(counts.get(q.get("key", ""), 0)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if path == "/slow":
            after = float(q.get("after", "1"))
            time.sleep(after)
            return self.json(200, {"done": True, "after": after})
        if path == "/sse":
            secs, every = float(q.get("secs", "10")), float(q.get("every", "1"))
            self.sse_head()
            start, i = time.time(), 0
            try:
                while True:
                    self.chunk(b'data: {"i":%d,"pad":"%s"}\n\n' % (i, b"x" * 64))
                    i += 1
                    if time.time() - start >= secs:
                        break
                    time.sleep(every)
                self.chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            return
        if path == "/stall":
            self.sse_head()
            try:
                for i in range(int(q.get("events", "1"))):
                    self.chunk(b'data: {"i":%d}\n\n' % i)
            except OSError:
                return
            self.hold(600)
            return
        if path == "/hang":
            self.hold(600)
            return
        self.json(404, {"error": "no such path"})

    do_GET = handle_any
    do_POST = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
