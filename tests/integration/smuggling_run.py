"""Drive `stagger proxy` with raw sockets (test_proxy_smuggling.sh; test code).

  python3 smuggling_run.py PROXY_PORT RAWLOG REQLOG PROXYLOG
The proxy forwards to raw_upstream.py, which writes RAWLOG (every byte it
received) and REQLOG (one REQ line per request it parsed). Prints one line
per failed assertion ("FAIL: ...") and "N checks, F failed"; exits 1 when
one failed. Every wait is a hang guard (GUARD seconds) that ends at the
event waited for, never a timing bound.
"""
import json, os, socket, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smuggling_corpus import VECTORS, SMUGGLED, CHUNKED_HIDING, cl  # noqa: E402

PORT, RAWLOG, REQLOG, PXLOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
GUARD = 10.0
checks = failed = 0


def check(name, cond, detail=""):
    global checks, failed
    checks += 1
    if not cond:
        failed += 1
        print("FAIL: %s %s" % (name, detail), flush=True)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def log_lines():
    return [json.loads(x) for x in read(PXLOG).decode().splitlines() if '"event":"proxy"' in x]


def exchange(raw, wait_close=False):
    """Send raw on a new connection; return (status, head, body, closed).
    closed: the proxy closed the connection after its answer (waited for
    only with wait_close)."""
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(GUARD)
    try:
        s.sendall(raw)
    except OSError:
        pass
    data, closed = b"", False
    try:
        while b"\r\n\r\n" not in data:
            got = s.recv(65536)
            if not got:
                closed = True
                break
            data += got
    except (socket.timeout, ConnectionResetError):
        closed = True
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.") else 0
    n = 0
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    try:
        while len(body) < n and not closed:
            got = s.recv(65536)
            if not got:
                closed = True
                break
            body += got
        if not closed and wait_close:
            closed = s.recv(1) == b""  # EOF: the proxy closed after its answer
    except socket.timeout:
        closed = False
    except ConnectionResetError:
        closed = True
    s.close()
    return status, head, body, closed


def wait_log(before):
    for _ in range(int(GUARD / 0.05)):
        lines = log_lines()
        if len(lines) > before:
            return lines[before:]
        time.sleep(0.05)
    return []


def requests_parsed():
    return read(REQLOG).decode("latin-1").splitlines()


# ---- the corpus ----------------------------------------------------------------------
for name, kind, want, reason, source, raw in VECTORS:
    marker = "sm-%s-%d" % (name, os.getpid())
    before = len(log_lines())
    status, head, body, closed = exchange(raw.replace(b"{M}", marker.encode()),
                                          kind != "ACCEPT")
    what = "%s %s (%s)" % (kind, name, source)
    if kind in ("REFUSE", "GUARD"):
        check(what + ": answered %d" % want, status == want, "(got %d)" % status)
        check(what + ": the connection is closed", closed)
        check(what + ": nothing forwarded", marker.encode() not in read(RAWLOG))
        new = wait_log(before)
        check(what + ": logged once with reason %s" % reason,
              len(new) == 1 and new[0].get("reason") == reason and new[0].get("status") == want,
              "(log: %s)" % new)
    else:
        check(what + ": answered 200", status == 200, "(got %d)" % status)
        mine = [r for r in requests_parsed() if marker in r]
        check(what + ": one request upstream", len(mine) == 1, "(%s)" % mine)
        raw_up = read(RAWLOG)
        at = raw_up.find(b"POST /smuggle/" + marker.encode())
        up_head = raw_up[at:raw_up.find(b"\r\n\r\n", at)] if at >= 0 else b""
        check(what + ": reframed by Content-Length, no Transfer-Encoding",
              b"\ncontent-length:" in up_head.lower() and b"transfer-encoding" not in up_head.lower(),
              "(%r)" % up_head)
        check(what + ": no NUL reaches the upstream", b"\x00" not in raw_up)
    check(what + ": no smuggled request parsed upstream",
          not any("/admin/" in r for r in requests_parsed()))

# ---- the reproduction: an attack, then a victim on another connection ---------
attack = (b"POST /smuggle/attack HTTP/1.1\r\nHost: proxy.test\r\n" + cl(CHUNKED_HIDING) +
          b"Transfer-Encoding : chunked\r\n\r\n" + CHUNKED_HIDING)
exchange(attack)
victim = (b"GET /victim HTTP/1.1\r\nHost: proxy.test\r\n"
          b"Authorization: Bearer VICTIM-TOKEN\r\n\r\n")
status, head, body, closed = exchange(victim)
check("victim: its own answer", status == 200 and body.startswith(b"path=/victim "),
      "(%d %r)" % (status, body))
parsed = requests_parsed()
check("victim: the upstream never ran the smuggled request",
      not any("/admin/" in r for r in parsed), "(%s)" % parsed[-3:])
check("victim: its token went only with its own request",
      all(r.startswith("REQ GET /victim ") for r in parsed if "VICTIM-TOKEN" in r), "(%s)" % parsed)
check("victim: the token is never logged by the proxy", b"VICTIM-TOKEN" not in read(PXLOG))

# ---- hop-by-hop fields, both ways --------------------------------------------------------
long_name = b"X-" + b"L" * 200
req = (b"GET /hop HTTP/1.1\r\nHost: proxy.test\r\nConnection: keep-alive, X-Secret-A\r\n"
       b"Connection: X-Secret-B, " + long_name + b"\r\nX-Secret-A: 1\r\nX-Secret-B: 2\r\n" +
       long_name + b": 3\r\nX-Kept: 4\r\n\r\n")
status, head, body, closed = exchange(req)
raw_up = read(RAWLOG)
at = raw_up.rfind(b"GET /hop ")
up_head = raw_up[at:raw_up.find(b"\r\n\r\n", at)].lower()
check("request: every Connection field's names dropped (2nd field, 200-byte name)",
      status == 200 and b"x-secret-a" not in up_head and b"x-secret-b" not in up_head and
      long_name.lower() not in up_head and b"connection" not in up_head, "(%r)" % up_head)
check("request: an end-to-end field kept", b"x-kept: 4" in up_head, "(%r)" % up_head)
low = head.lower()
check("answer: the names of every Connection field dropped",
      b"x-hop-a" not in low and b"x-hop-b" not in low and b"x-keep: 3" in low, "(%r)" % head)

# ---- answer heads: whole, or a 502 that says why -----------------------------------------
get = b"GET %s HTTP/1.1\r\nHost: proxy.test\r\n\r\n"
status, head, body, closed = exchange(get % b"/bighead?n=20000")
check("a 20000-byte field reaches the client whole",
      status == 200 and b"X-Big: " + b"b" * 20000 + b"\r\n" in head + b"\r\n",
      "(%d, head %d bytes)" % (status, len(head)))
for path in (b"/bighead?n=40000", b"/manyheads?k=40&n=1000"):
    before = len(log_lines())
    status, head, body, closed = exchange(get % path)
    new = wait_log(before)
    check("%s: 502 upstream-head-too-large" % path.decode(),
          status == 502 and b"stagger-error: upstream-head-too-large" in head.lower(),
          "(%d %r)" % (status, head[:200]))
    check("%s: logged as such" % path.decode(),
          len(new) == 1 and new[0].get("status") == 502 and
          new[0].get("reason") == "upstream-head-too-large", "(%s)" % new)

print("%d checks, %d failed" % (checks, failed), flush=True)
sys.exit(1 if failed else 0)
