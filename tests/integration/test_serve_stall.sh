#!/usr/bin/env bash
# stagger serve never stalls a reply: no ~40 ms Nagle / delayed-ACK pause on
# reused keep-alive connections (curl's time_total, and 30 python workers),
# many concurrent connections, and a hung client that leaves is cleaned up.
# 127.0.0.1 only.
. "$(dirname "$0")/serve_test_lib.sh"

# start_server NAME ARGS...: sets SRV_PID, PORT, URL (serve_lib.sh).
start_server() { serve_start "$@"; }
# stop_server [SIG]: SIGTERM (or SIG); the server must exit 0 within 5 s.
stop_server() {
    local rc=0
    serve_stop "$SRV_PID" "${1:-TERM}" || rc=$?
    SRV_PID=""
    [ "$rc" -ne 124 ] || fail "server still running 5 s after SIG${1:-TERM}"
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIG${1:-TERM}"
}

start_server stall --rate 100000 --burst 1000 --ratelimit-headers --stats "$TMP/stall.stats"

# --- curl on one reused connection ------------------------------------------------
args=()
for i in $(seq 40); do args+=(-o /dev/null "$URL/k/$i"); done
curl -s -w '%{num_connects} %{time_total}\n' "${args[@]}" >"$TMP/curl.t"
# POST with a body on a reused connection too (-d applies to every URL).
args=()
for i in $(seq 8); do args+=(-o /dev/null "$URL/echo"); done
curl -s -w '%{num_connects} %{time_total}\n' -d 'x=1' "${args[@]}" >>"$TMP/curl.t"
"$PYTHON" - "$TMP/curl.t" <<'EOF' || fail "curl stalls: $(cat "$TMP/curl.t")"
import sys
rows = [l.split() for l in open(sys.argv[1])]
assert len(rows) == 48, len(rows)
reused = [float(t) for n, t in rows if n == "0"]
assert len(reused) >= 45, rows               # keep-alive: connections reused
reused.sort()
med = reused[len(reused) // 2]
print("  curl: %d reused requests, median %.1f ms, max %.1f ms" % (len(reused), 1000 * med, 1000 * reused[-1]))
# A Nagle / delayed-ACK stall holds every reply on a reused connection for
# the peer's delayed-ACK timer (40 ms on Linux): the median would sit at
# >= 40 ms. A share of slow replies is no evidence (a busy machine makes
# some), so the bound is the timer, on the median.
assert med < 0.040, med
EOF
ok "curl on a reused connection: no ~40 ms stalls (GET and POST)"

# --- 30 keep-alive workers -----------------------------------------------------------
"$PYTHON" - "$PORT" <<'EOF' || fail "30 workers"
import http.client, sys, threading, time
port = int(sys.argv[1])
WORKERS, EACH = 30, 40
lat, errors, lock = [], [], threading.Lock()
def worker(w):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for i in range(EACH):
            t = time.monotonic()
            if i % 2:
                c.request("POST", "/echo", body=b"payload %d" % i, headers={"X-Client-Id": "w%d" % w})
            else:
                c.request("GET", "/track/%d-%d" % (w, i), headers={"X-Client-Id": "w%d" % w})
            r = c.getresponse(); r.read()
            d = time.monotonic() - t
            assert r.status == 200, r.status
            with lock: lat.append(d)
        c.close()
    except Exception as e:
        with lock: errors.append(repr(e))
ts = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
t0 = time.monotonic()
for t in ts: t.start()
for t in ts: t.join(60)
wall = time.monotonic() - t0
assert not errors, errors[:3]
assert len(lat) == WORKERS * EACH
lat.sort()
p50, p99 = lat[len(lat) // 2], lat[int(len(lat) * 0.99)]
near40 = sum(1 for x in lat if 0.035 <= x <= 0.060)
print("  %d requests in %.2f s: p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d in 35-60 ms"
      % (len(lat), wall, 1000 * p50, 1000 * p99, 1000 * lat[-1], near40))
# A Nagle/delayed-ACK stall puts nearly every reply at >= 40 ms (the
# delayed-ACK timer), so the median would be there; the count near 40 ms is
# printed, not judged: a loaded machine puts replies there too.
assert p50 < 0.040, p50
EOF
ok "30 keep-alive workers: no reply stalls"

# --- many concurrent connections --------------------------------------------------
"$PYTHON" - "$PORT" <<'EOF' || fail "concurrent connections"
import socket, sys
port = int(sys.argv[1])
N = 400
socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(N)]
for i, s in enumerate(socks):
    s.sendall(b"GET /c/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
okc = 0
for s in socks:
    data = b""
    while True:
        b = s.recv(4096)
        if not b: break
        data += b
    okc += data.startswith(b"HTTP/1.1 200 ")
    s.close()
assert okc == N, okc
print("  %d connections open at once, all answered" % N)
EOF
ok "hundreds of concurrent connections"

stop_server
"$PYTHON" -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["total"] == 1648 and d["admitted"] == 1648 and d["limited"] == 0, d
assert d["status"]["200"] == 1648' "$TMP/stall.stats" || fail "stats: $(cat "$TMP/stall.stats")"
ok "stats: all 1648 requests admitted and answered"

# --- a hung client that gives up is cleaned up -----------------------------------------
start_server gone --hang-every 1
for i in 1 2 3; do
    rc=0
    curl -s -o /dev/null --max-time 0.3 "$URL/h/$i" || rc=$?
    [ "$rc" -eq 28 ] || fail "hang $i: curl exit $rc"
done
conns=""
for _ in $(seq 20); do
    conns=$("$PYTHON" -c '
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
c.request("GET", "/__stats"); print(json.loads(c.getresponse().read())["connections"])' "$PORT")
    [ "$conns" = 1 ] && break
    sleep 0.1
done
[ "$conns" = 1 ] || fail "hung connections still open after their clients left: $conns"
stop_server
ok "hung connections are closed once their clients leave"
