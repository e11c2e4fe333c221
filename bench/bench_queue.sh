#!/bin/bash
# bench_queue.sh BUILD_DIR: the work queue on Redis Streams (docs/queue.md)
# against a server limited to 200 requests/s whose every answer takes
# 100 ms (`stagger serve --rate 200 --burst 20 --latency 100ms`), JOBS jobs
# (default 10000; BENCH_QUEUE_JOBS), concurrency 10 per worker, the limit
# shared in Redis (--rate 200 --burst 5, BENCH_QUEUE_CLIENT_BURST: a burst
# below the server's, so that jitter on the way does not meet a full bucket):
#   1 worker   bound by latency: 10 in flight / 100 ms = ~100/s
#   4 workers  together at the limit (goal: >= 0.95 x 200/s, < 2% 429s,
#              0 jobs lost)
# Per run: wall time and jobs/s from the server's own request log (first to
# last arrival), the share of 429s there, jobs not done in the queue's
# report, Redis round trips per job (EVALSHA calls, which is every request a
# worker makes during a run, from INFO commandstats) and Redis CPU per job
# (INFO cpu, user + sys). A fresh server and queue per run; one redis-server
# (persistence off) for all. Only 127.0.0.1 is contacted; every run is
# capped by timeout(1). Prints figures, asserts nothing.
set -eu
B=${1:?usage: bench/bench_queue.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
for tool in redis-server redis-cli python3; do
  command -v $tool >/dev/null || { echo "bench_queue: $tool not found (scripts/deps.sh)" >&2; exit 2; }
done
N=${BENCH_QUEUE_JOBS:-10000}
RATE=200
BURST=20
CBURST=${BENCH_QUEUE_CLIENT_BURST:-5}
T=$(mktemp -d /tmp/stg_bench_queue.XXXXXX)
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  >"$T/redis.out" 2>&1 &
RPID=$!
PIDS="$RPID"
i=0
until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 200 ] || { echo "redis-server did not start" >&2; exit 1; }
  sleep 0.05
done

# redis_stat: "EVALSHA_CALLS CPU_SECONDS" now.
redis_stat() {
  c=$(redis-cli -p "$RPORT" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
  cpu=$(redis-cli -p "$RPORT" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }')
  echo "${c:-0} $cpu"
}

run() { # run NAME WORKERS
  name=$1; w=$2
  "$S" serve --port 0 --rate $RATE --burst $BURST --latency 100ms --threads 4 \
    --log "$T/$name.log" >"$T/$name.srv" 2>&1 &
  SPID=$!
  PIDS="$PIDS $SPID"
  PORT=""
  i=0
  while [ -z "$PORT" ] && [ $i -lt 200 ]; do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/$name.srv" 2>/dev/null)
    sleep 0.05; i=$((i + 1))
  done
  seq -f "http://127.0.0.1:$PORT/item/%g" 1 "$N" >"$T/$name.txt"
  Q="redis://127.0.0.1:$RPORT/$name"
  set -- $(redis_stat)
  c0=$1 cpu0=$2
  timeout -k 5 400 "$S" batch --queue "$Q" --worker "${name}1" -j 10 --rate $RATE --burst $CBURST \
    --progress none -q "$T/$name.txt" >/dev/null 2>"$T/${name}1.err" &
  wp="$!"
  k=2
  while [ $k -le "$w" ]; do
    # join once the queue exists (the first worker loads it)
    i=0
    until [ "$(redis-cli -p "$RPORT" exists "stagger:q:{$name}:meta")" = 1 ] || [ $i -ge 600 ]; do
      sleep 0.05; i=$((i + 1))
    done
    timeout -k 5 400 "$S" batch --queue "$Q" --worker "$name$k" -j 10 --rate $RATE --burst $CBURST \
      --progress none -q >/dev/null 2>"$T/$name$k.err" &
    wp="$wp $!"
    k=$((k + 1))
  done
  for p in $wp; do wait "$p" || true; done
  set -- $(redis_stat)
  c1=$1 cpu1=$2
  kill "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  "$S" batch report --queue "$Q" --json >"$T/$name.report" 2>/dev/null || echo '{}' >"$T/$name.report"
  python3 - "$T/$name.log" "$T/$name.report" "$w" "$N" "$RATE" "$((c1 - c0))" "$cpu0" "$cpu1" <<'PY'
import json, sys
log, rep, w, n, rate, calls, cpu0, cpu1 = sys.argv[1:]
w, n, rate, calls = int(w), int(n), float(rate), int(calls)
rows = [json.loads(l) for l in open(log)]
t = [r["t_us"] for r in rows]
wall = (max(t) - min(t)) / 1e6 if len(t) > 1 else 0
ok = sum(1 for r in rows if r["status"] == 200)
r429 = sum(1 for r in rows if r["status"] == 429)
try:
    done = json.load(open(rep))["states"]["done"]
except Exception:
    done = 0
jps = ok / wall if wall else 0
cpu_us = (float(cpu1) - float(cpu0)) * 1e6 / max(done, 1)
print(f"| {w} | {n} | {wall:.1f} | {jps:.1f} | {jps / rate:.3f} | {100 * r429 / max(len(rows), 1):.2f}% "
      f"| {n - done} | {calls / max(done, 1):.2f} | {cpu_us:.0f} |")
PY
}

echo "Work queue: $N jobs, server --rate $RATE --burst $BURST --latency 100ms, -j 10 per worker, limit shared in Redis (--rate $RATE --burst $CBURST: below the server's burst, so arrival jitter meets slack)"
echo
echo "| workers | jobs | wall s | jobs/s | x limit | 429 share | jobs lost | Redis round trips/job | Redis CPU us/job |"
echo "|---|---|---|---|---|---|---|---|---|"
run one 1
run four 4
