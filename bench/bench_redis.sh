#!/bin/sh
# Decisions per second of the Redis limiter, beside a plain Redis command
# measured in the same run on the same server.
#
#   bench/bench_redis.sh [BUILD_DIR] [SECONDS] [PIPELINE]
#
# BUILD_DIR (default build/release) must hold bench/bench_redis (built by
# `cmake --build BUILD_DIR --target bench_redis`). Starts redis-server on a
# free loopback port (persistence off), runs redis-benchmark for PING and
# INCR with one connection (-c 1), sequential and with -P PIPELINE, then
# bench_redis (one connection: one EVALSHA per decision, then PIPELINE
# decisions per round trip; the breaker; the shared adaptive rate's acquire),
# prints the ratios, and stops the server. Every
# step runs under `timeout`, so the whole run is bounded (about 60 s).
# Then the shared adaptive rate's figures: `bench_redis URL learn` (4
# processes, one learned rate, against a simulated 100/s), and, when
# BUILD_DIR holds the stagger CLI, 4 `stagger batch` processes sharing one
# learned rate against `stagger serve --rate 40 --burst 5` (the share of
# 429s and the busiest 2 s after the start). Those two were assertions of
# the integration tests once; they depend on how busy the machine is.
# Then token leases: `bench_redis URL lease 0|40000 3` (round trips per
# admission, the global rate against burst + rate * t), per request beside
# 40 ms leases.
# Asserts nothing about speed: exit status 0 unless something failed to run.
set -eu

BUILD=${1:-build/release}
SECONDS_EACH=${2:-2}
PIPE=${3:-64}
BIN=$BUILD/bench/bench_redis
N=100000

if [ ! -x "$BIN" ]; then
  echo "bench_redis: $BIN missing; build it: cmake --build $BUILD --target bench_redis" >&2
  exit 2
fi
for tool in redis-server redis-benchmark redis-cli python3; do
  command -v $tool >/dev/null || { echo "bench_redis: $tool not found (scripts/deps.sh)" >&2; exit 2; }
done

. "$(dirname "$0")/redis_lib.sh"
redis_bench_start bench_redis # PORT, PID, OUT

# "PING_INLINE: 48076.92 requests per second, p50=..." -> NAME VALUE
rb() {
  timeout 60 redis-benchmark -h 127.0.0.1 -p "$PORT" -t ping,incr -n $N -q -c 1 "$@" |
    tr '\r' '\n' | awk -F': ' '/requests per second/ { split($2, a, " "); print $1, a[1] }'
}
echo "redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), 127.0.0.1:$PORT, one connection each"
rb >"$OUT"
rb -P "$PIPE" | sed 's/^/P_/' >>"$OUT"
timeout 60 "$BIN" "redis://127.0.0.1:$PORT/bench" "$SECONDS_EACH" "$PIPE" >>"$OUT"
# Server-side cost of one script run, from Redis's own accounting.
redis-cli -h 127.0.0.1 -p "$PORT" info commandstats | tr -d '\r' |
  sed -n 's/^cmdstat_\(evalsha\|incr\):.*usec_per_call=\([0-9.]*\).*/server_us_\1 \2/p' >>"$OUT"

# The same decisions over TLS (rediss://, issue 34): a second redis-server
# on its TLS port only, a throwaway CA (tests/integration/tls_certs.sh).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if command -v openssl >/dev/null; then
  TD=$(mktemp -d)
  sh "$ROOT/tests/integration/tls_certs.sh" "$TD/pki"
  TPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port 0 --tls-port "$TPORT" --bind 127.0.0.1 --save '' --appendonly no \
    --tls-cert-file "$TD/pki/server.pem" --tls-key-file "$TD/pki/server.key" \
    --tls-ca-cert-file "$TD/pki/ca.pem" --tls-auth-clients no --daemonize no >/dev/null 2>&1 &
  TPID=$!
  i=0
  until redis-cli --tls --cacert "$TD/pki/ca.pem" -p "$TPORT" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.05
  done
  BENCH_REDIS_CACERT="$TD/pki/ca.pem" timeout 60 "$BIN" "rediss://127.0.0.1:$TPORT/bench" \
    "$SECONDS_EACH" "$PIPE" 2>/dev/null | sed 's/^/tls_/' >>"$OUT"
  kill "$TPID" 2>/dev/null; wait "$TPID" 2>/dev/null || true
  rm -rf "$TD"
fi

timeout 60 "$BIN" "redis://127.0.0.1:$PORT/learn" learn 9 >>"$OUT"

# Token leases (issue 19, goal 5): 4 processes x 1000/s through one 2000/s
# key, one round trip per acquire (lease 0, the baseline) and 40 ms leases;
# Redis's own EVALSHA count around each run (give-backs at exit included).
for L in 0 40000; do
  redis-cli -h 127.0.0.1 -p "$PORT" config resetstat >/dev/null
  timeout 60 "$BIN" "redis://127.0.0.1:$PORT/lease$L" lease $L 3 >>"$OUT"
  redis-cli -h 127.0.0.1 -p "$PORT" info commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_evalsha:calls=\([0-9]*\).*/lease${L}_evalsha \1/p" >>"$OUT"
done

# 4 batch processes, no --rate: one rate learned in Redis, against 40/s.
CLI=$BUILD/src/cli/stagger
if [ -x "$CLI" ]; then
  D=$(mktemp -d)
  "$CLI" serve --port 0 --rate 40 --burst 5 --log "$D/serve.log" >"$D/serve.out" 2>&1 &
  SP=$!
  i=0
  until [ -s "$D/serve.out" ]; do
    i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.05
  done
  SPORT=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$D/serve.out")
  BPIDS=""
  for w in 1 2 3 4; do
    seq -f "a$w-%03g" 1 60 >"$D/keys$w.txt"
    timeout 120 "$CLI" batch -q --url "http://127.0.0.1:$SPORT/track/{}" "$D/keys$w.txt" \
      --db "$D/$w.db" --concurrency 8 --limiter "redis://127.0.0.1:$PORT/batchlearn" \
      >/dev/null 2>&1 &
    BPIDS="$BPIDS $!"
  done
  for p in $BPIDS; do wait "$p" || true; done
  kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null || true
  python3 - "$D/serve.log" >>"$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "/track/" in l]
ts = sorted(r["t_us"] for r in rows)
late = [t for t in ts if t - ts[0] > 3e6]
busiest = max(sum(1 for u in late if t <= u < t + 2e6) for t in late) / 2 if late else 0
print("batch_calls", len(rows))
print("batch_429_pct", round(100 * sum(r["status"] == 429 for r in rows) / max(1, len(rows)), 1))
print("batch_busiest", busiest)
PY
  rm -rf "$D"
fi

awk -v pipe="$PIPE" '
  { v[$1] = $2 }
  END {
    printf "%-42s %12s\n", "", "per second"
    printf "%-42s %12.0f\n", "redis-benchmark PING (-c 1)", v["PING_MBULK"]
    printf "%-42s %12.0f\n", "redis-benchmark INCR (-c 1)", v["INCR"]
    printf "%-42s %12.0f\n", "limiter try, sequential", v["limiter_sequential"]
    if ("tls_limiter_sequential" in v)
      printf "%-42s %12.0f  (%.2f x plain TCP)\n", "limiter try, sequential, TLS (rediss://)", v["tls_limiter_sequential"], v["tls_limiter_sequential"] / v["limiter_sequential"]
    printf "%-42s %12.0f\n", "breaker allow, sequential", v["breaker_sequential"]
    printf "%-42s %12.0f\n", "adaptive acquire, sequential", v["adaptive_sequential"]
    printf "%-42s %12.0f\n", "redis-benchmark PING (-c 1 -P " pipe ")", v["P_PING_MBULK"]
    printf "%-42s %12.0f\n", "redis-benchmark INCR (-c 1 -P " pipe ")", v["P_INCR"]
    printf "%-42s %12.0f\n", "limiter acquire_many, " pipe " per round trip", v["limiter_pipelined"]
    if ("tls_limiter_pipelined" in v)
      printf "%-42s %12.0f\n", "limiter acquire_many, TLS", v["tls_limiter_pipelined"]
    printf "%-42s %12s\n", "Redis CPU per EVALSHA / per INCR (us)", v["server_us_evalsha"] " / " v["server_us_incr"]
    if (v["INCR"] > 0 && v["P_INCR"] > 0) {
      printf "ratio limiter/INCR sequential: %.2f\n", v["limiter_sequential"] / v["INCR"]
      printf "ratio limiter/PING sequential: %.2f\n", v["limiter_sequential"] / v["PING_MBULK"]
      printf "ratio adaptive/INCR sequential: %.2f\n", v["adaptive_sequential"] / v["INCR"]
      printf "ratio limiter/INCR pipelined:  %.2f\n", v["limiter_pipelined"] / v["P_INCR"]
      printf "ratio pipelined/sequential limiter: %.1f\n", v["limiter_pipelined"] / v["limiter_sequential"]
    }
    printf "shared adaptive rate, 4 processes, 9 s, against %s/s: last 3 s %s sends/s, %s%% throttled (first 6 s: %s sends, %s throttled)\n", v["learn_limit"], v["learn_late_rate"], v["learn_late_throttled_pct"], v["learn_early_sends"], v["learn_early_throttled"]
    if ("lease40000_admitted" in v && v["lease0_admitted"] > 0 && v["lease40000_admitted"] > 0) {
      printf "shared limit at scale: 4 processes x 1000/s, one key of 2000/s (burst 100), 3 s\n"
      printf "%-42s %12s %12s\n", "", "per request", "40 ms leases"
      rt0 = v["lease0_evalsha"] / v["lease0_admitted"]; rt1 = v["lease40000_evalsha"] / v["lease40000_admitted"]
      printf "%-42s %12.3f %12.3f\n", "Redis round trips per admission", rt0, rt1
      printf "%-42s %12.0f %12.0f\n", "achieved global rate (/s)", v["lease0_rate"], v["lease40000_rate"]
      printf "%-42s %12.0f %12.0f\n", "bound (burst + rate * t) / t (/s)", v["lease0_bound"], v["lease40000_bound"]
      printf "%-42s %12.0f %12.0f\n", "worst window - (burst + rate * t)", v["lease0_excess"], v["lease40000_excess"]
      printf "ratio round trips leases/per request: %.3f; rate leases/per request: %.3f\n", rt1 / rt0, v["lease40000_rate"] / v["lease0_rate"]
      printf "goal5: rt_per_request=%.4f rt_lease=%.4f rate_per_request=%.0f rate_lease=%.0f bound_lease=%.0f excess_lease=%.0f\n", rt0, rt1, v["lease0_rate"], v["lease40000_rate"], v["lease40000_bound"], v["lease40000_excess"]
    }
    if ("batch_calls" in v)
      printf "stagger batch x4, shared adaptive rate, against 40/s: %s calls, %s%% answered 429, busiest 2 s after the first 3 s: %s/s\n", v["batch_calls"], v["batch_429_pct"], v["batch_busiest"]
  }' "$OUT"

# The servers' quotas shared (docs/redis.md, "Shared quotas"): the share of
# arrivals an OpenAI-like tokens-per-minute upstream refused, with one proxy,
# with two proxies and a batch worker sharing through one Redis, and with two
# proxies each alone; test_proxy_shared_quota.sh's run with 24 calls a program.
if [ -x "$CLI" ]; then
  HERE=$(cd "$(dirname "$0")" && pwd)
  STAGGER=$CLI SQ_CALLS=24 timeout 180 bash "$HERE/../tests/integration/test_proxy_shared_quota.sh" \
    2>/dev/null | grep -E '^(one|shared|anthropic|alone):' | sed 's/^/shared quotas, /' || true
fi
