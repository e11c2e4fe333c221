#!/bin/bash
# bench_h2.sh BUILD_DIR: the engine against real-looking servers (issue 20).
#  1. A slow server: `stagger serve --capacity 20 --service-time 50ms` (20 at
#     once, the rest queued: 400 requests/s at best), BENCH_JOBS jobs
#     (default 5000) by `stagger batch` with a fixed -j 200 (the baseline)
#     and with the learned concurrency (no -j). Prints wall time,
#     requests/s, p50/p99 latency (the attempt_end durations of the log),
#     where the controller settled (the last attempts' limit) and the most
#     the server had at once. Goal: p50 <= 1.5 x 50 ms, >= 360 requests/s.
#  2. HTTP/2 vs HTTP/1.1 over TLS: nghttpd (h2 only) with --http2, and
#     `stagger serve --tls-cert` with --http1.1 (nghttpd speaks no 1.1), 2000
#     files, -j 50: connections opened (the attempt_end events) and wall time.
#     Then h2c (nghttpd --no-tls, --http2-prior-knowledge; libcurl 7.88.x
#     gets a connection per request, see src/curl/xfer.c), and a GOAWAY
#     after every 100th stream (tests/h2srv, when built): the sends the
#     server never processed and stagger resent (never_processed).
#  3. The slow server in virtual time: `stagger sim slow-server`.
# Prints figures, asserts nothing. Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_h2.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
N=${BENCH_JOBS:-5000}
T=$(mktemp -d /tmp/stg_bench_h2.XXXXXX)
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

serve() { # NAME ARGS...: sets URL
  n=$1; shift
  "$S" serve --port 0 "$@" >"$T/$n.out" 2>"$T/$n.err" &
  PIDS="$PIDS $!"
  for _ in $(seq 200); do [ -s "$T/$n.out" ] && break; sleep 0.05; done
  URL=$(head -n1 "$T/$n.out" | sed 's/^listening on //')
}

summary() { # LABEL LOG WALL_S STATS_JSON
  python3 - "$@" <<'PY'
import json, sys
label, log, wall, st = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
e = [json.loads(l) for l in open(log) if '"attempt_end"' in l]
d = sorted(x["duration_ms"] for x in e)
conc = [x.get("concurrency", 0) for x in e[-200:]]
never = sum(bool(x.get("never_processed")) for x in e)
cap = st.get("capacity") or {}
print(f"{label:<22} {wall:7.2f} s {len(e)/wall:8.1f} req/s  p50 {d[len(d)//2]:6.1f} ms"
      f"  p99 {d[int(len(d)*0.99)]:7.1f} ms  settled {sum(conc)/len(conc) if conc else 0:5.1f}"
      f"  server max at once {cap.get('max_in_system', '-')}  connections {sum(x.get('connects',0) for x in e)}"
      + (f"  never processed {never}" if never else ""))
PY
}

run() { # LABEL URLFILE ARGS...
  label=$1; f=$2; shift 2
  rm -f "$T/r.db" "$T/r.jsonl"
  t0=$(date +%s.%N)
  timeout 300 "$S" batch -q --db "$T/r.db" --log "$T/r.jsonl" "$@" "$f" || true
  t1=$(date +%s.%N)
  WALL=$(python3 -c "print($t1 - $t0)")
}

echo "== slow server: --capacity 20 --service-time 50ms, $N jobs =="
for mode in fixed200 learned; do
  serve "$mode" --capacity 20 --service-time 50ms
  for i in $(seq "$N"); do echo "$URL/track/$mode$i"; done >"$T/u.txt"
  if [ "$mode" = fixed200 ]; then run "fixed -j 200" "$T/u.txt" -j 200
  else run "learned" "$T/u.txt"; fi
  summary "$mode" "$T/r.jsonl" "$WALL" "$(curl -s "$URL/__stats")"
done

NGHTTPD=$(command -v nghttpd || echo /usr/sbin/nghttpd)
if [ -x "$NGHTTPD" ] && command -v openssl >/dev/null; then
  echo "== HTTP/2 (nghttpd) vs HTTP/1.1 (stagger serve), TLS, 2000 requests, -j 50 =="
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/k.pem" -out "$T/c.pem" -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
  mkdir -p "$T/www"
  for i in $(seq 2000); do echo "$i" >"$T/www/f$i"; done
  P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$NGHTTPD" -a 127.0.0.1 -d "$T/www" "$P" "$T/k.pem" "$T/c.pem" >/dev/null 2>&1 &
  PIDS="$PIDS $!"
  sleep 0.5
  for i in $(seq 2000); do echo "https://127.0.0.1:$P/f$i"; done >"$T/h2.txt"
  run h2 "$T/h2.txt" --http2 -j 50 --cacert "$T/c.pem"
  summary "http/2 nghttpd" "$T/r.jsonl" "$WALL" '{}'
  serve tls --tls-cert "$T/c.pem" --tls-key "$T/k.pem"
  for i in $(seq 2000); do echo "$URL/track/h1$i"; done >"$T/h1.txt"
  run h1 "$T/h1.txt" --http1.1 -j 50 --cacert "$T/c.pem"
  summary "http/1.1 serve" "$T/r.jsonl" "$WALL" '{}'
  P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$NGHTTPD" --no-tls -a 127.0.0.1 -d "$T/www" "$P" >/dev/null 2>&1 &
  PIDS="$PIDS $!"
  sleep 0.5
  for i in $(seq 2000); do echo "http://127.0.0.1:$P/f$i"; done >"$T/h2c.txt"
  run h2c "$T/h2c.txt" --http2-prior-knowledge -j 50
  summary "h2c nghttpd" "$T/r.jsonl" "$WALL" '{}'
  H2SRV=$B/tests/integration/stg_h2srv
  if [ -x "$H2SRV" ]; then
    "$H2SRV" --cert "$T/c.pem" --key "$T/k.pem" --log /dev/null --goaway-after 100 \
      >"$T/h2srv.out" 2>&1 &
    PIDS="$PIDS $!"
    for _ in $(seq 200); do [ -s "$T/h2srv.out" ] && break; sleep 0.05; done
    URL=$(head -n1 "$T/h2srv.out" | sed 's/^listening on //')
    for i in $(seq 2000); do echo "$URL/g$i"; done >"$T/g.txt"
    run goaway "$T/g.txt" --http2 -j 50 --cacert "$T/c.pem"
    summary "h2 GOAWAY every 100" "$T/r.jsonl" "$WALL" '{}'
  fi
else
  echo "nghttpd or openssl missing: HTTP/2 rows skipped"
fi

echo "== the slow server in virtual time (stagger sim slow-server) =="
"$S" sim slow-server
