#!/usr/bin/env bash
# stagger proxy against slowloris: connections that drip a request head a
# byte at a time are never idle, so --client-timeout never ends them.
#  1. More dripping connections than --max-connections: while they drip,
#     /__stagger/health and a normal request, each on a new connection,
#     are answered within the documented head time (10 s, the default
#     --head-timeout): near the limit the oldest open heads are closed, so
#     a slot is always free (before, MHD dropped every new connection
#     until the drippers stopped).
#  2. One dripping connection alone is closed once its head has been open
#     for --head-timeout: not before it, and long before it stops dripping.
# All on 127.0.0.1; the drippers are bounded in number and in time.
. "$(dirname "$0")/lib.sh"
scratch pxsl
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

serve_start up
cat > "$T/drip.py" <<'EOF'
# drip.py PORT N SECONDS CHECKS: N connections send a request line and then
# one header byte every 0.3 s for SECONDS. Meanwhile CHECKS times, spread
# over the drip, a new connection asks GET /__stagger/health and GET /echo
# with a 10 s timeout. Prints "checks OK FAILED", then "closed N" (the
# drippers the proxy closed) and "first_close S" (seconds to the first).
import http.client, socket, sys, threading, time
port, n, secs, nchecks = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
t0 = time.monotonic()
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: ")
    s.setblocking(False)
    socks.append(s)
ok, failed, why = 0, 0, []

def checks():
    global ok, failed
    for k in range(nchecks):
        time.sleep(secs / (nchecks + 1))
        for path in ("/__stagger/health", "/echo"):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", path)
                st = c.getresponse().status
                c.close()
                if st == 200:
                    ok += 1
                    continue
                why.append("%s: %d" % (path, st))
            except Exception as e:
                why.append("%s: %r" % (path, e))
            failed += 1

th = threading.Thread(target=checks)
th.start()
closed, first = set(), None
while time.monotonic() - t0 < secs:
    for i, s in enumerate(socks):
        if i in closed:
            continue
        try:
            s.send(b"a")
            try:
                if s.recv(1) == b"":
                    raise ConnectionResetError
            except BlockingIOError:
                pass
        except (BrokenPipeError, ConnectionResetError, OSError):
            closed.add(i)
            if first is None:
                first = time.monotonic() - t0
    time.sleep(0.3)
th.join()
print("checks", ok, failed, "; ".join(why))
print("closed", len(closed))
print("first_close", -1 if first is None else round(first, 2))
EOF

# ---- 1: more drippers than connections: the proxy stays reachable ----------------
proxy_start a --upstream "$URL" --max-connections 64
out=$($PY "$T/drip.py" "$PXPORT" 80 6 3)
read -r _ ok failed why <<<"$(grep '^checks' <<<"$out")"
check "80 drippers, 64 connections: health and /echo answered ($ok answered, $failed not: $why)" \
  [ "$ok/$failed" = 6/0 ]
closed=$(sed -n 's/^closed //p' <<<"$out")
check "  the oldest open heads were closed to make room ($closed of 80)" [ "$closed" -ge 16 ]
h=$(curl -s -m 10 "$PX/__stagger/health")
jcheck "  and afterwards too" "$h" 'j["status"] == "ok"'
proxy_stop

# ---- 2: a head open longer than --head-timeout is closed --------------------------
proxy_start b --upstream "$URL" --head-timeout 2s
out=$($PY "$T/drip.py" "$PXPORT" 1 12 1)
first=$(sed -n 's/^first_close //p' <<<"$out")
check "one dripper: closed after its 2 s head timeout, before its 12 s drip ends ($first s)" \
  $PY -c 'import sys; f = float(sys.argv[1]); sys.exit(0 if 2 <= f < 12 else 1)' "$first"
read -r _ ok failed why <<<"$(grep '^checks' <<<"$out")"
check "  a normal client meanwhile: answered ($ok, $failed: $why)" [ "$ok" = 2 ]
# A kept-alive connection that sends its requests at once is not cut.
n=$(curl -s -m 20 "$PX/echo" "$PX/echo" "$PX/echo" -o /dev/null -o /dev/null -o /dev/null \
  -w '%{http_code}\n' | grep -c '^200$')
check "  three requests on one kept-alive connection ($n answered)" [ "$n" = 3 ]
proxy_stop
serve_stop "$SRV_PID" || true
finish
