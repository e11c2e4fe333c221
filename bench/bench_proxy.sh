#!/bin/sh
# bench_proxy.sh BUILD_DIR: stagger proxy on loopback, side by side in one run.
#  1. Goodput: bench/peers/naive/naive.py (50 workers, fixed 1 s sleep on a
#     429), unchanged, 2000 jobs against `stagger serve --rate 100 --burst
#     20` (Retry-After: 1), direct and through `stagger proxy` (its base URL
#     is the only change; adaptive rate, and --rate 100 --burst 20). Per run:
#     completion time over the ideal (2000 / 100 s), the server's 429 share
#     (from its request log) and jobs lost. Goals: <= 1.10x ideal, < 2% 429s,
#     0 lost through the proxy (direct it takes ~4-5x with ~70% refused).
#  2. Overhead when nothing limits: wrk (2 threads, 30 connections, 5 s)
#     direct and through the proxy (--rate 0) against an unlimited server:
#     req/s and p50 latency; goals: >= 0.5x direct, added p50 <= 200 us;
#     and with one connection, where p50 is the added latency itself (no
#     queueing behind 29 others); and without -j (the concurrency
#     learned per host, the default), with the limit it learned. A peer
#     beside it: nginx as a reverse proxy (proxy_pass to the same server,
#     HTTP/1.1 keep-alive upstream, one worker like stagger proxy's one
#     loop), when nginx is installed: what a mature C proxy gets from the
#     same two cores.
#  3. Memory per open client connection: a fresh proxy's RSS with 0, 1000
#     and 2000 idle keep-alive connections, each of which had one answer
#     from upstream (MHD zeroes a connection's whole pool after a request).
# BENCH_PROXY_GOODPUT=0 skips part 1 (the overhead alone, for profiling).
# Prints figures, asserts nothing. Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_proxy.sh BUILD_DIR}
S=$B/src/cli/stagger
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/nginx_lib.sh"
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
"$S" proxy --help > /dev/null 2>&1 || { echo "stagger proxy not built" >&2; exit 2; }
N=${BENCH_JOBS:-2000}
RATE=100
BURST=20
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d /tmp/stg_bench_proxy.XXXXXX)
SRV_PID="" PX_PID=""
cleanup() {
  for p in $NGX_PID $PX_PID $SRV_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
NGX_PID=""
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
now() { date +%s.%N; }

port_of() { # FILE PID
  i=0
  while [ $i -lt 200 ]; do
    # The file may not be there yet (the shell opens it in the child).
    p=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$1" 2>/dev/null || true)
    [ -n "$p" ] && { echo "$p"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
    i=$((i + 1))
  done
  echo "did not start: $(cat "$1")" >&2
  exit 1
}
start_server() { # NAME ARGS...
  n=$1; shift
  "$S" serve --port 0 "$@" > "$T/$n.srv" 2>&1 &
  SRV_PID=$!
  PORT=$(port_of "$T/$n.srv" "$SRV_PID")
}
start_proxy() { # NAME ARGS...
  n=$1; shift
  "$S" proxy --listen 127.0.0.1:0 "$@" > "$T/$n.px" 2> "$T/$n.pxerr" &
  PX_PID=$!
  PXPORT=$(port_of "$T/$n.px" "$PX_PID")
}
stop() { for p in "$@"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }

seq -f 'k%05g' 1 "$N" > "$T/keys.txt"

# ---- 1. goodput -------------------------------------------------------------------
goodput() { # NAME [proxy args...] ("direct": no proxy)
  name=$1; shift
  start_server "$name" --rate $RATE --burst $BURST --retry-after seconds --log "$T/$name.log"
  base="http://127.0.0.1:$PORT/track/"
  if [ "$name" != direct ]; then
    start_proxy "$name" --upstream "http://127.0.0.1:$PORT" --deadline 5m "$@"
    base="http://127.0.0.1:$PXPORT/track/"
  fi
  t0=$(now)
  timeout -k 5 300 "$PY" "$ROOT/bench/peers/naive/naive.py" "$base" "$T/keys.txt" 50 > "$T/$name.done" || true
  t1=$(now)
  [ "$name" != direct ] && stop "$PX_PID" && PX_PID=""
  stop "$SRV_PID"; SRV_PID=""
  "$PY" - "$name" "$t0" "$t1" "$T/$name.log" "$N" "$RATE" "$T/$name.done" >> "$T/goodput" <<'PY'
import json, re, sys
name, t0, t1, log, n, rate, done = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
st = [json.loads(l)["status"] for l in open(log)]
calls, r429 = len(st), sum(1 for s in st if s == 429)
m = re.search(r"ok=(\d+)", open(done).read())
ok = int(m.group(1)) if m else 0
label = {"direct": "naive client, direct",
         "adaptive": "naive client via stagger proxy (adaptive)",
         "rate": "naive client via stagger proxy --rate 100 --burst 20"}[name]
print("%-54s %7.1f s %6.2fx %6d %6.1f%% %5d" % (label, t1 - t0, (t1 - t0) / (n / rate), calls,
                                                 100.0 * r429 / max(calls, 1), n - ok))
PY
}
if [ "${BENCH_PROXY_GOODPUT:-1}" != 0 ]; then
  echo "bench_proxy: goodput, $N jobs" >&2
  goodput direct
  goodput adaptive
  goodput rate --rate $RATE --burst $BURST
fi

# ---- 2. overhead: wrk direct and through the proxy -----------------------------------
wrk_run() { # NAME URL [CONNECTIONS]
  c=${3:-30}
  t=2; [ "$c" = 1 ] && t=1
  timeout -k 5 60 wrk -t$t -c"$c" -d5s --latency "$2" > "$T/$1.wrk" 2>&1 || true
  rps=$(sed -n 's/^Requests\/sec:[[:space:]]*//p' "$T/$1.wrk")
  p50=$(awk '$1 == "50%" {print $2}' "$T/$1.wrk")
  echo "$1 ${rps:-0} ${p50:-?}" >> "$T/wrk"
}
# nginx as a reverse proxy to 127.0.0.1:$1 on a free loopback port (sets
# NGX_PID, NGXPORT); false when nginx is missing or does not answer.
nginx_proxy() {
  NGXPORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  nginx_run "$T/ngx" 1 "$NGXPORT" /track/w <<EOF
    upstream up { server 127.0.0.1:$1; keepalive 64; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$NGXPORT;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
EOF
}
if command -v wrk > /dev/null 2>&1; then
  echo "bench_proxy: overhead (wrk)" >&2
  start_server over
  wrk_run direct "http://127.0.0.1:$PORT/track/w"
  wrk_run direct1 "http://127.0.0.1:$PORT/track/w" 1
  start_proxy over --upstream "http://127.0.0.1:$PORT" --rate 0 -j 100
  wrk_run proxy "http://127.0.0.1:$PXPORT/track/w"
  wrk_run proxy1 "http://127.0.0.1:$PXPORT/track/w" 1
  stop "$PX_PID"; PX_PID=""
  if nginx_proxy "$PORT"; then wrk_run nginx "http://127.0.0.1:$NGXPORT/track/w"; fi
  stop "$NGX_PID"; NGX_PID=""
  # ---- 3. memory per open client connection: a fresh proxy (a loaded one
  # would reuse the heap wrk left, and hide the cost), its RSS with 0, 1000
  # and 2000 idle keep-alive connections that each had one answer.
  start_proxy mem --upstream "http://127.0.0.1:$PORT" --rate 0 -j 100
  curl -s -o /dev/null "http://127.0.0.1:$PXPORT/track/warm"
  mem=$("$PY" - "$PXPORT" "$PX_PID" <<'PY'
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def rss():
    time.sleep(0.3)
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
out, socks = [rss()], []
for step in range(2):
    for _ in range(1000):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /track/idle HTTP/1.1\r\nHost: x\r\n\r\n")  # one answer, then idle
        socks.append(s)
    for s in socks[-1000:]:
        s.recv(4096)
    out.append(rss())
print(*out)
PY
)
  set -- $mem
  rss0=$1 rss1=$2 rss2=$3
  stop "$PX_PID"; PX_PID=""
  # The default: no -j, the concurrency learned per host.
  start_proxy learned --upstream "http://127.0.0.1:$PORT" --rate 0
  wrk_run proxyL "http://127.0.0.1:$PXPORT/track/w"
  climit=$(curl -s "http://127.0.0.1:$PXPORT/__stagger/health" |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["concurrency_limit"])' || echo '?')
  stop "$PX_PID"; PX_PID=""
  stop "$SRV_PID"; SRV_PID=""
else
  echo "wrk missing: overhead not measured" >&2
fi

if [ -s "$T/goodput" ]; then
  printf '%-54s %9s %7s %6s %7s %5s\n' "goodput (ideal $((N / RATE)) s)" "time" "/ideal" "calls" "429s" "lost"
  cat "$T/goodput"
fi
if [ -s "$T/wrk" ]; then
  echo
  "$PY" - "$T/wrk" <<'PY'
import sys
def us(s):
    for suf, m in (("us", 1), ("ms", 1e3), ("s", 1e6)):
        if s.endswith(suf):
            return float(s[:-len(suf)]) * m
    return float("nan")
rows = {l.split()[0]: l.split() for l in open(sys.argv[1])}
d, p = rows["direct"], rows["proxy"]
print("%-54s %10s %10s" % ("overhead (wrk -t2 -c30, unlimited server)", "req/s", "p50"))
print("%-54s %10.0f %10s" % ("wrk direct", float(d[1]), d[2]))
print("%-54s %10.0f %10s" % ("wrk through stagger proxy --rate 0", float(p[1]), p[2]))
print("%-54s %9.2fx %+9.0fus" % ("proxy / direct, added p50", float(p[1]) / max(float(d[1]), 1),
                                  us(p[2]) - us(d[2])))
if "nginx" in rows:
    n = rows["nginx"]
    print("%-54s %10.0f %10s" % ("wrk through nginx proxy_pass (peer, 1 worker)", float(n[1]), n[2]))
    print("%-54s %9.2fx" % ("nginx / direct", float(n[1]) / max(float(d[1]), 1)))
l = rows["proxyL"]
print("%-54s %10.0f %10s" % ("wrk through stagger proxy, learned concurrency (no -j)", float(l[1]), l[2]))
d1, p1 = rows["direct1"], rows["proxy1"]
print("%-54s %10.0f %10s" % ("wrk -c1 direct (no queueing)", float(d1[1]), d1[2]))
print("%-54s %10.0f %10s" % ("wrk -c1 through stagger proxy", float(p1[1]), p1[2]))
print("%-54s %10s %+9.0fus" % ("added p50, one connection", "", us(p1[2]) - us(d1[2])))
PY
  echo
  echo "learned concurrency limit after that run: $climit (30 clients)"
  echo "memory per open client connection: $(( (rss2 - rss0) * 1024 / 2000 )) bytes (proxy RSS $rss0 kB idle, $rss1 kB with 1000 idle keep-alive connections, $rss2 kB with 2000)"
fi
