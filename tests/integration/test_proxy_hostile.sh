#!/usr/bin/env bash
# stagger proxy against hostile peers, on 127.0.0.1.
# Upstream (stg_hostile): one that hangs after its status line, one that
# resets before its headers end, one whose status line is garbage: each
# gives the client a clean 502/504 with a Stagger-Error reason, bounded by
# the deadline (curl's own -m is only a hang guard). One that resets in the
# middle of a 2xx body: the head and bytes already reached the client, so
# the request is not resent (the upstream saw one request) and the client
# sees a cut body, not a spliced one.
# Clients: a stalled head is closed after --client-timeout and a dripping
# one bounded by the connection's pool (431), a request
# with oversized headers gets 431, 10000 idle connections leave other
# clients unaffected; the proxy's memory per idle connection is reported
# and bounded by its per-connection pool (32 KiB), also for 1000 kept-alive
# connections that each had an answer (MHD zeroes the whole pool after
# each request, so that is the realistic idle cost).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch pxh
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3


# ---- hostile upstreams: a clean 502/504 -------------------------------------------
for spec in "slowloris 504 deadline" "reset-headers 502 upstream-reset" \
            "huge-status 502 upstream-error"; do
  set -- $spec
  hostile "$1" "$1"
  proxy_start "$1" --upstream "http://127.0.0.1:$HPORT" --rate 0 --deadline 2s --retries 1 --base 10ms
  code=$(curl -s -m 30 -D "$T/$1.h" -o "$T/$1.b" -w '%{http_code}' "$PX/x" || true)
  check "$1: $2 (got $code)" [ "$code" = "$2" ]
  check "$1: Stagger-Error: $3 ($(grep -i stagger-error "$T/$1.h" | tr -d '\r'))" \
    grep -qi "^Stagger-Error: $3" "$T/$1.h"
  check "$1: a JSON error body" $PY -c 'import json,sys; assert "error" in json.load(open(sys.argv[1]))' "$T/$1.b"
  proxy_stop
  stop_jobs
done

# ---- reset in the middle of a 2xx body: not resent, the client sees the cut ---------
hostile mid reset-mid-body --size 1000000
proxy_start mid --upstream "http://127.0.0.1:$HPORT" --rate 0 --base 10ms
rc=0; curl -s -m 30 -o "$T/mid.b" "$PX/p" || rc=$?
check "mid-body reset: the client sees a cut body (curl exit $rc)" [ "$rc" = 18 ] || [ "$rc" = 56 ]
check "mid-body reset: no resend once bytes were forwarded" [ "$(grep -c '^REQ ' "$T/mid.log")" = 1 ]
size=$(stat -c %s "$T/mid.b")
check "mid-body reset: only the first half arrived ($size)" [ "$size" -lt 1000000 ]
code=$(curl -s -m 30 -o "$T/mid2.b" -w '%{http_code}' "$PX/p")
check "the next request is whole ($code, $(stat -c %s "$T/mid2.b"))" [ "$code" = 200 ] && [ "$(stat -c %s "$T/mid2.b")" = 1000000 ]
proxy_stop
stop_jobs

# ---- hostile clients ----------------------------------------------------------------
serve_start up
proxy_start cl --upstream "$URL" --rate 0 --client-timeout 1s --max-connections 11000

# Oversized request headers: 431, and the proxy goes on.
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 100000 /dev/zero | tr '\0' a)" "$PX/echo" || true)
check "oversized headers: 431 (got $code)" [ "$code" = 431 ]

# Slowloris: a head that stops halfway is closed after --client-timeout; one
# that drips on forever is bounded by the per-connection pool (431 once the
# head passes the 32 KiB pool); another client is served meanwhile.
out=$($PY - "$PXPORT" "$PX/echo" <<'EOF'
import socket, sys, threading, time, urllib.request
port, url = int(sys.argv[1]), sys.argv[2]
silent = socket.create_connection(("127.0.0.1", port))
silent.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
drip = socket.create_connection(("127.0.0.1", port))
drip.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
served = []
def other():
    served.append(urllib.request.urlopen(url, timeout=30).status)
th = threading.Thread(target=other)
th.start()
answer = b""
for i in range(200):                 # 200 KiB at most: past the 32 KiB pool
    try:
        drip.sendall(b"X-Drip-%d: %s\r\n" % (i, b"y" * 1000))
    except OSError:
        break
    time.sleep(0.01)
drip.settimeout(30)
try:
    answer = drip.recv(200)
except OSError:
    pass
th.join()
silent.settimeout(30)                # a hang guard; the proxy closes at 1 s
try:
    gone = silent.recv(65536) == b""
except OSError:
    gone = False
print("silent:" + ("closed" if gone else "open"),
      "drip:" + answer.split(b"\r\n")[0].decode(errors="replace").replace(" ", "_"),
      "other:%s" % served)
EOF
)
check "slowloris: a stalled head is closed ($out)" grep -q 'silent:closed' <<<"$out"
check "slowloris: a dripping head gets 431 at the pool's bound" grep -q 'drip:HTTP/1.1_431' <<<"$out"
check "slowloris: another client served meanwhile" grep -q 'other:\[200\]' <<<"$out"

# 10000 idle connections: others unaffected; memory per connection reported.
# (A proxy whose idle timeout outlasts opening them all on a busy machine.)
proxy_stop
proxy_start idle --upstream "$URL" --rate 0 --client-timeout 5m --max-connections 11000
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$PXPID/status"; }
base=$(rss)
out=$($PY - "$PXPORT" "$PX/echo" "$PXPID" <<'EOF'
import resource, socket, sys, time, urllib.request
port, url, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks = []
for i in range(10000):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    socks.append(s)
def rss():
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
# Wait until the proxy has accepted them all (its metrics say how many).
for _ in range(600):
    m = urllib.request.urlopen(url.replace("/echo", "/__stagger/metrics"), timeout=30).read().decode()
    n = [int(l.split()[1]) for l in m.splitlines() if l.startswith("stagger_proxy_connections ")][0]
    if n >= 10000:
        break
    time.sleep(0.05)
ok = urllib.request.urlopen(url, timeout=30).status
print(n, ok, rss())
EOF
)
set -- $out
check "10000 idle connections held ($1)" [ "${1:-0}" -ge 10000 ]
check "  another client served meanwhile (${2:-})" [ "${2:-}" = 200 ]
per=$(( ((${3:-0} - base) * 1024) / 10000 ))
echo "memory per idle client connection: $per bytes (RSS $base kB -> ${3:-?} kB)"
check "  memory per idle connection $per B within the 32 KiB pool" [ "$per" -lt 32768 ]
proxy_stop
# Kept alive after an answer each: the pool (32 KiB) and MHD's connection.
# (The sanitizer's quarantine of freed blocks is not the proxy's memory.)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0" \
  proxy_start kept --upstream "$URL" --rate 0 --client-timeout 5m
curl -s -o /dev/null "$PX/echo"
base=$(rss)
got=$($PY - "$PXPORT" "$PXPID" <<'EOF'
import socket, sys
port, pid = int(sys.argv[1]), sys.argv[2]
socks = []
for i in range(1000):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    socks.append(s)
n = sum(1 for s in socks if s.recv(65536).startswith(b"HTTP/1.1 200"))
for l in open("/proc/%s/status" % pid):
    if l.startswith("VmRSS:"):
        print(n, l.split()[1])
EOF
)
set -- $got
per=$(( ((${2:-0} - base) * 1024) / 1000 ))
echo "memory per kept-alive idle connection: $per bytes (RSS $base kB -> ${2:-?} kB, ${1:-0} answered)"
check "1000 kept-alive connections answered (${1:-0})" [ "${1:-0}" = 1000 ]
# Bound: the pool and half again (MHD's connection, the sanitizer's
# redzones and shadow); the 64 KiB pool this replaced cost 66 KB (77 KB
# under the sanitizer).
check "  memory per kept-alive connection $per B within 1.5 pools (48 KiB)" [ "$per" -lt $((48 << 10)) ]
proxy_stop
serve_stop "$SRV_PID" || true
finish
