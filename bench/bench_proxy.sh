#!/bin/sh
# bench_proxy.sh BUILD_DIR: stagger proxy on loopback, side by side in one run.
#  1. Goodput: bench/peers/naive/naive.py (50 workers, fixed 1 s sleep on a
#     429), unchanged, 2000 jobs against `stagger serve --rate 100 --burst
#     20` (Retry-After: 1), direct and through `stagger proxy` (its base URL
#     is the only change; adaptive rate, and --rate 100 --burst 20). Per run:
#     completion time over the ideal (2000 / 100 s), the server's 429 share
#     (from its request log) and jobs lost. Goals: <= 1.10x ideal, < 2% 429s,
#     0 lost through the proxy (direct it takes ~4-5x with ~70% refused).
#     And 4 naive processes at once through the adaptive proxy, a quarter
#     of the jobs each (issue #35 goal 3: <= 1.10x, < 1% 429s). span/ideal:
#     the server's first request to its last over the ideal, the proxy's
#     pace without the clients' start-up.
#  2. Overhead when nothing limits: wrk (2 threads, 30 connections, 5 s)
#     direct and through the proxy (--rate 0) against an unlimited server:
#     req/s and p50 latency; and with one connection, where p50 is the
#     added latency itself (no queueing behind 29 others). The peer beside
#     it: nginx as a reverse proxy (proxy_pass to the same server, HTTP/1.1
#     keep-alive upstream, one worker like stagger proxy's one loop), when
#     nginx is installed: what a mature C proxy gets from the same two
#     cores (issue #35 goal 1: >= 1.0x nginx at -c30 and -c1, added p50 at
#     -c1 <= 100 us). And h2o (Debian's 2.2.5, proxy.reverse, one thread),
#     when installed: a proxy made, like stagger's, of an HTTP library's
#     server and client on one event loop. Direct, stagger, nginx and h2o
#     take turns
#     (BENCH_PROXY_TURNS, default 3, of BENCH_PROXY_DUR s, default 5), each
#     figure the median of its turns, with the CPU time per request of the
#     proxy (nginx's worker) beside it. Then once without -j (the
#     concurrency learned per host, the default), with the limit it learned.
#     And the floor under the proxy's upstream half: bench_curl_cpu, libcurl
#     alone making the same keep-alive GETs (30 at once, and one), its CPU
#     per request: what stagger's proxy spends at least, per request, for
#     as long as libcurl is its transport.
#  3. Memory per open client connection: a fresh proxy's RSS with 0, 1000
#     and 2000 idle keep-alive connections, each of which had one answer
#     from upstream (MHD zeroes a connection's whole pool after a request);
#     and a fresh nginx worker's and h2o's the same way (goal: <= 8 KB).
# BENCH_PROXY_GOODPUT=0 skips part 1 (the overhead alone, for profiling);
# BENCH_PROXY_CASES picks part 1's runs (default "direct adaptive adaptive4
# rate").
# Prints figures, asserts nothing. Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_proxy.sh BUILD_DIR}
S=$B/src/cli/stagger
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/proxy_lib.sh"
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
  for p in $NGX_PID $H2O_PID $PX_PID $SRV_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
NGX_PID="" H2O_PID=""
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
now() { date +%s.%N; }

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
  if [ "$name" = adaptive4 ]; then
    # 4 client processes, a quarter of the keys each, started together:
    # the proxy sees four programs, none of which knows of the others.
    pids=""
    for i in 0 1 2 3; do
      awk -v i=$i 'NR % 4 == i' "$T/keys.txt" > "$T/keys4.$i"
      timeout -k 5 300 "$PY" "$ROOT/bench/peers/naive/naive.py" "$base" "$T/keys4.$i" 50 > "$T/$name.done.$i" &
      pids="$pids $!"
    done
    for p in $pids; do wait "$p" || true; done
    cat "$T/$name.done".? | awk -F'[= ]' '{ok += $2; f += $4} END {print "ok=" ok " failed=" f}' > "$T/$name.done"
  else
    timeout -k 5 300 "$PY" "$ROOT/bench/peers/naive/naive.py" "$base" "$T/keys.txt" 50 > "$T/$name.done" || true
  fi
  t1=$(now)
  [ "$name" != direct ] && stop "$PX_PID" && PX_PID=""
  stop "$SRV_PID"; SRV_PID=""
  "$PY" - "$name" "$t0" "$t1" "$T/$name.log" "$N" "$RATE" "$T/$name.done" >> "$T/goodput" <<'PY'
import json, re, sys
name, t0, t1, log, n, rate, done = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
recs = [json.loads(l) for l in open(log)]
st = [r["status"] for r in recs]
# The server's span, first request to last: the pace the proxy kept, without
# the clients' own start-up (4 python processes of 50 threads take seconds
# to send their first request on a busy machine).
ts = [r["t_us"] for r in recs]
span = (max(ts) - min(ts)) / 1e6 if ts else 0.0
calls, r429 = len(st), sum(1 for s in st if s == 429)
m = re.search(r"ok=(\d+)", open(done).read())
ok = int(m.group(1)) if m else 0
label = {"direct": "naive client, direct",
         "adaptive": "naive client via stagger proxy (adaptive)",
         "adaptive4": "4 naive processes via stagger proxy (adaptive)",
         "rate": "naive client via stagger proxy --rate 100 --burst 20"}[name]
print("%-54s %7.1f s %6.2fx %6d %6.1f%% %5d %8.2fx" % (label, t1 - t0, (t1 - t0) / (n / rate), calls,
                                                        100.0 * r429 / max(calls, 1), n - ok,
                                                        span / (n / rate)))
PY
}
if [ "${BENCH_PROXY_GOODPUT:-1}" != 0 ]; then
  echo "bench_proxy: goodput, $N jobs" >&2
  for g in ${BENCH_PROXY_CASES:-direct adaptive adaptive4 rate}; do
    case $g in
      rate) goodput rate --rate $RATE --burst $BURST ;;
      *) goodput "$g" ;;
    esac
  done
fi

# ---- 2. overhead: wrk direct, through the proxy and through nginx ------------------
# Turns alternate (direct, stagger, nginx; -c30, then -c1), BENCH_PROXY_TURNS
# of them (default 3), and each figure is the median of its turns: on a busy
# machine one 5 s run moves by a third. Beside req/s and p50, each turn
# reads the CPU time the proxy (nginx: its worker; direct: the server)
# spent per request (/proc/PID/task/*/schedstat): what one request costs,
# which a busy machine disturbs less than a rate.
DUR=${BENCH_PROXY_DUR:-5}
wrk_run() { # NAME URL [CONNECTIONS [PID]]
  c=${3:-30}
  t=2; [ "$c" = 1 ] && t=1
  c0=0; [ -n "${4:-}" ] && c0=$(cpu_ns "$4")
  timeout -k 5 60 wrk -t$t -c"$c" -d${DUR}s --latency "$2" > "$T/$1.wrk" 2>&1 || true
  c1=0; [ -n "${4:-}" ] && c1=$(cpu_ns "$4")
  rps=$(sed -n 's/^Requests\/sec:[[:space:]]*//p' "$T/$1.wrk")
  p50=$(awk '$1 == "50%" {print $2}' "$T/$1.wrk")
  n=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in.*/\1/p' "$T/$1.wrk")
  cpu=$(awk -v a="$c0" -v b="$c1" -v n="${n:-0}" 'BEGIN {print (n > 0 && b > a) ? (b - a) / n / 1000 : "-"}')
  echo "$1 ${rps:-0} ${p50:-?} $cpu" >> "$T/wrk"
}
# idle_mem PORT PID: PID's RSS (kB) fresh, with 1000 and with 2000 idle
# keep-alive connections to PORT that each had one answer.
idle_mem() {
  "$PY" - "$1" "$2" <<'PY'
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
}
if command -v wrk > /dev/null 2>&1; then
  echo "bench_proxy: overhead (wrk)" >&2
  start_server over
  SRV_OVER=$SRV_PID
  start_proxy over --upstream "http://127.0.0.1:$PORT" --rate 0 -j 100
  NGXW=""
  nginx_proxy "$PORT" || { NGXW=""; echo "nginx missing: no peer" >&2; }
  h2o_proxy "$PORT" || echo "h2o missing: no second peer" >&2
  turns=${BENCH_PROXY_TURNS:-3}
  r=0
  while [ $r -lt "$turns" ]; do
    for c in 30 1; do
      sfx=""; [ $c = 1 ] && sfx=1
      wrk_run "direct$sfx" "http://127.0.0.1:$PORT/track/w" $c "$SRV_OVER"
      wrk_run "proxy$sfx" "http://127.0.0.1:$PXPORT/track/w" $c "$PX_PID"
      [ -n "$NGXW" ] && wrk_run "nginx$sfx" "http://127.0.0.1:$NGXPORT/track/w" $c "$NGXW"
      [ -n "$H2O_PID" ] && wrk_run "h2o$sfx" "http://127.0.0.1:$H2OPORT/track/w" $c "$H2O_PID"
    done
    r=$((r + 1))
  done
  stop "$PX_PID"; PX_PID=""
  stop "$NGX_PID"; NGX_PID=""
  stop "$H2O_PID"; H2O_PID=""
  # The floor under the proxy's upstream half: libcurl alone (no stagger
  # code) making the same keep-alive GETs to the same server, its CPU per
  # request, at 30 transfers at once and at one.
  if [ -x "$B/bench/bench_curl_cpu" ]; then
    for c in 30 1; do
      "$B/bench/bench_curl_cpu" "http://127.0.0.1:$PORT/track/w" "$DUR" $c >> "$T/curlcpu" 2>&1 || true
    done
  fi
  # ---- 3. memory per open client connection: a fresh proxy (a loaded one
  # would reuse the heap wrk left, and hide the cost), its RSS with 0, 1000
  # and 2000 idle keep-alive connections that each had one answer; and a
  # fresh nginx's worker the same way.
  start_proxy mem --upstream "http://127.0.0.1:$PORT" --rate 0 -j 100
  curl -s -o /dev/null "http://127.0.0.1:$PXPORT/track/warm"
  set -- $(idle_mem "$PXPORT" "$PX_PID")
  rss0=$1 rss1=$2 rss2=$3
  stop "$PX_PID"; PX_PID=""
  nrss0=""
  if nginx_proxy "$PORT"; then
    set -- $(idle_mem "$NGXPORT" "$NGXW")
    nrss0=$1 nrss1=$2 nrss2=$3
  fi
  stop "$NGX_PID"; NGX_PID=""
  hrss0=""
  if h2o_proxy "$PORT"; then
    set -- $(idle_mem "$H2OPORT" "$H2O_PID")
    hrss0=$1 hrss1=$2 hrss2=$3
  fi
  stop "$H2O_PID"; H2O_PID=""
  # The default: no -j, the concurrency learned per host.
  start_proxy learned --upstream "http://127.0.0.1:$PORT" --rate 0
  wrk_run proxyL "http://127.0.0.1:$PXPORT/track/w" 30 "$PX_PID"
  climit=$(curl -s "http://127.0.0.1:$PXPORT/__stagger/health" |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["concurrency_limit"])' || echo '?')
  stop "$PX_PID"; PX_PID=""
  stop "$SRV_PID"; SRV_PID=""
else
  echo "wrk missing: overhead not measured" >&2
fi

if [ -s "$T/goodput" ]; then
  printf '%-54s %9s %7s %6s %7s %5s %9s\n' "goodput (ideal $((N / RATE)) s)" "time" "/ideal" "calls" "429s" "lost" "span/ideal"
  cat "$T/goodput"
fi
if [ -s "$T/wrk" ]; then
  echo
  "$PY" - "$T/wrk" "${BENCH_PROXY_TURNS:-3}" "$T/curlcpu" <<'PY'
import os, statistics, sys
from collections import defaultdict
def us(s):
    for suf, m in (("us", 1), ("ms", 1e3), ("s", 1e6)):
        if s.endswith(suf):
            return float(s[:-len(suf)]) * m
    return float("nan")
turns = defaultdict(list)
for l in open(sys.argv[1]):
    w = l.split()
    turns[w[0]].append((float(w[1]), us(w[2]), float(w[3]) if len(w) > 3 and w[3] != "-" else None))
def med(name):  # (req/s, p50 us, CPU us per request) medians of its turns
    t = turns.get(name)
    if not t:
        return None
    cpus = [x[2] for x in t if x[2] is not None]
    return (statistics.median(x[0] for x in t), statistics.median(x[1] for x in t),
            statistics.median(cpus) if cpus else None)
def p50(v):
    return "%.0fus" % v if v < 1000 else "%.2fms" % (v / 1000)
d, p, n, h = med("direct"), med("proxy"), med("nginx"), med("h2o")
print("overhead (wrk, unlimited server): medians of %s alternating turns; CPU = the proxy's "
      "(nginx: its worker's; direct: the server's) per request" % sys.argv[2])
print("%-54s %10s %10s %12s" % ("", "req/s", "p50", "CPU/request"))
def line(label, m):
    print("%-54s %10.0f %10s %12s" % (label, m[0], p50(m[1]), "%.1fus" % m[2] if m[2] else "-"))
line("wrk direct", d)
line("wrk through stagger proxy --rate 0", p)
print("%-54s %9.2fx %+9.0fus" % ("proxy / direct, added p50", p[0] / max(d[0], 1), p[1] - d[1]))
if n:
    line("wrk through nginx proxy_pass (peer, 1 worker)", n)
    print("%-54s %9.2fx" % ("nginx / direct", n[0] / max(d[0], 1)))
if h:
    line("wrk through h2o proxy.reverse (peer, 1 thread)", h)
l = med("proxyL")
line("wrk through stagger proxy, learned concurrency (no -j)", l)
d1, p1, n1 = med("direct1"), med("proxy1"), med("nginx1")
line("wrk -c1 direct (no queueing)", d1)
line("wrk -c1 through stagger proxy", p1)
print("%-54s %10s %+9.0fus" % ("added p50, one connection", "", p1[1] - d1[1]))
if n1:
    line("wrk -c1 through nginx proxy_pass", n1)
    print("%-54s %10s %+9.0fus" % ("added p50, one connection, nginx", "", n1[1] - d1[1]))
h1 = med("h2o1")
if h1:
    line("wrk -c1 through h2o proxy.reverse", h1)
# libcurl alone, the upstream half (bench_curl_cpu): its CPU per request.
floor = {}
if os.path.exists(sys.argv[3]):
    for l in open(sys.argv[3]):
        w = dict(x.split("=", 1) for x in l.split()[1:] if "=" in x)
        if l.startswith("curl_cpu ") and "c" in w:
            floor[w["c"]] = w
for c, sfx in (("30", ""), ("1", "1")):
    f = floor.get(c)
    if f:
        print("%-54s %10s %10s %12s" % ("libcurl alone, the upstream half only, %s at once" % c,
                                           f["rps"], "", "%sus" % f["cpu_us"]))
# issue #35 goal 1's figures for bench/analyze.py, as KEY=VALUE words.
words = ["turns=%s" % sys.argv[2]]
for c, key in (("30", "curl"), ("1", "curl1")):
    if c in floor:
        words += ["%s_cpuus=%s" % (key, floor[c]["cpu_us"]), "%s_userus=%s" % (key, floor[c]["user_us"])]
for key, m in (("direct", d), ("stagger", p), ("nginx", n), ("h2o", h), ("direct1", d1),
               ("stagger1", p1), ("nginx1", n1), ("h2o1", h1)):
    if m:
        words += ["%s_rps=%.0f" % (key, m[0]), "%s_p50us=%.0f" % (key, m[1])]
        if m[2]:
            words.append("%s_cpuus=%.1f" % (key, m[2]))
print("goal35_proxy:", " ".join(words))
PY
  echo
  echo "learned concurrency limit after that run: $climit (30 clients)"
  echo "memory per open client connection: $(( (rss2 - rss0) * 1024 / 2000 )) bytes (proxy RSS $rss0 kB idle, $rss1 kB with 1000 idle keep-alive connections, $rss2 kB with 2000)"
  if [ -n "$nrss0" ]; then
    echo "memory per open client connection, nginx: $(( (nrss2 - nrss0) * 1024 / 2000 )) bytes (worker RSS $nrss0 kB idle, $nrss1 kB with 1000 idle keep-alive connections, $nrss2 kB with 2000)"
  fi
  if [ -n "$hrss0" ]; then
    echo "memory per open client connection, h2o: $(( (hrss2 - hrss0) * 1024 / 2000 )) bytes (RSS $hrss0 kB idle, $hrss1 kB with 1000 idle keep-alive connections, $hrss2 kB with 2000)"
  fi
fi
