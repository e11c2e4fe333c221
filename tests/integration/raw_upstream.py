"""A lenient upstream that logs the raw bytes it receives (test code, 127.0.0.1 only).

It parses requests the way many real servers do, which is what makes request
smuggling through a proxy dangerous: spaces around a header name are trimmed
("Transfer-Encoding : chunked" is Transfer-Encoding), Transfer-Encoding wins
over Content-Length when it mentions chunked, and the connection is kept
alive, so bytes left over after one request's body are read as the next
request.

  python3 raw_upstream.py RAWLOG REQLOG
RAWLOG gets every byte received, as received (appended); REQLOG one line per
request parsed: "REQ <method> <target> auth=<Authorization or ->".
Prints "listening on http://127.0.0.1:PORT" first (lib.sh's listen_port).

Answers (any method):
  /bighead?n=N        200 with one field X-Big of N bytes
  /manyheads?k=K&n=N  200 with K fields X-Many-i of N bytes each
  /hop                200 with two Connection fields (naming X-Hop-A and
                      X-Hop-B), those two fields, and X-Keep
  anything else       200, body "path=<target> auth=<Authorization or ->"
"""
import socket, sys, threading, urllib.parse

raw_log = open(sys.argv[1], "ab", buffering=0)
req_log = open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()


class Conn:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        data = self.s.recv(65536)
        if not data:
            raise EOFError
        with lock:
            raw_log.write(data)
        self.buf += data

    def line(self):
        while b"\n" not in self.buf:
            self.fill()
        ln, self.buf = self.buf.split(b"\n", 1)
        return ln[:-1] if ln.endswith(b"\r") else ln

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def answer(c, target, auth):
    u = urllib.parse.urlparse(target)
    q = urllib.parse.parse_qs(u.query)
    fields = []
    body = b"path=%s auth=%s\n" % (target.encode(), auth.encode())
    if u.path == "/bighead":
        fields.append(("X-Big", "b" * int(q["n"][0])))
    elif u.path == "/manyheads":
        for i in range(int(q["k"][0])):
            fields.append(("X-Many-%d" % i, "m" * int(q["n"][0])))
    elif u.path == "/hop":
        fields += [("Connection", "X-Hop-A"), ("X-Hop-A", "1"), ("Connection", "X-Hop-B"),
                   ("X-Hop-B", "2"), ("X-Keep", "3")]
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n" % len(body)
    head += "".join("%s: %s\r\n" % f for f in fields)
    c.s.sendall(head.encode() + b"\r\n" + body)


def serve(s):
    c = Conn(s)
    try:
        while True:
            ln = c.line()
            if not ln.strip():
                continue
            parts = ln.decode("latin-1").split(" ")
            method, target = parts[0], parts[1] if len(parts) > 1 else ""
            hdrs = {}
            while True:
                h = c.line()
                if not h:
                    break
                if b":" in h:
                    k, v = h.decode("latin-1").split(":", 1)
                    hdrs[k.strip().lower()] = v.strip()  # lenient: names trimmed
            if "chunked" in hdrs.get("transfer-encoding", "").lower():
                while True:
                    size = int(c.line().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while c.line():
                            pass
                        break
                    c.exact(size + 2)
            elif "content-length" in hdrs:
                c.exact(int(hdrs["content-length"]))
            auth = hdrs.get("authorization", "-")
            req_log.write("REQ %s %s auth=%s\n" % (method, target, auth))
            answer(c, target, auth)
    except (EOFError, OSError, ValueError, IndexError):
        pass
    finally:
        s.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
print("listening on http://127.0.0.1:%d" % srv.getsockname()[1], flush=True)
while True:
    s, _ = srv.accept()
    threading.Thread(target=serve, args=(s,), daemon=True).start()
