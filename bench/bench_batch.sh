#!/bin/sh
# bench_batch.sh BUILD_DIR: the batch incident (background.md section 2) on
# loopback. 2000 lookups against `stagger serve --rate 100 --burst 20`
# (Retry-After: 1 on refusals), by:
#   stagger (rate given)  stagger batch --rate 100 --burst 20 --concurrency 30
#   stagger (adaptive)    stagger batch --concurrency 30 (no rate given)
#   naive fixed sleep     50 workers, 1 s sleep on 429 (python3, keep-alive)
# and prints, per client, the completion time over the ideal (2000 / 100 s =
# 20 s) and the share of calls answered 429, counted in the server's own
# request log. A fresh server per client. Takes about 1.5 minutes; prints
# figures, asserts nothing (goals: <= 1.05 with the rate given; <= 1.10 and
# under 2% 429s adaptive). Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_batch.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
N=${BENCH_JOBS:-2000}
RATE=100
BURST=20
T=$(mktemp -d /tmp/stg_bench_batch.XXXXXX)
SRV_PID=""
cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

seq -f 'T%05g' 1 "$N" >"$T/keys.txt"

start_server() {
  "$S" serve --port 0 --rate "$RATE" --burst "$BURST" --log "$T/$1.log" >"$T/$1.srv" 2>&1 &
  SRV_PID=$!
  PORT=""
  i=0
  while [ $i -lt 100 ]; do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/$1.srv")
    [ -n "$PORT" ] && break
    sleep 0.05
    i=$((i + 1))
  done
  [ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}
now() { date +%s.%N; }


# run_case NAME: runs the client in $T/NAME.cmd; appends a row to $T/rows.
run_case() {
  name=$1
  start_server "$name"
  t0=$(now)
  case $name in
    rate)
      "$S" batch -q --db "$T/rate.db" --url "http://127.0.0.1:$PORT/track/{}" \
        --rate $RATE --burst $BURST --concurrency 30 "$T/keys.txt" || true ;;
    adaptive)
      "$S" batch -q --db "$T/adaptive.db" --url "http://127.0.0.1:$PORT/track/{}" \
        --concurrency 30 "$T/keys.txt" || true ;;
    naive)
      python3 "$(dirname "$0")/peers/naive/naive.py" "http://127.0.0.1:$PORT/track/" \
        "$T/keys.txt" >"$T/naive.done" ;;
  esac
  t1=$(now)
  stop_server
  case $name in
    naive) ok=$(sed -n 's/^ok=\([0-9]*\).*/\1/p' "$T/naive.done") ;;
    *) ok=$("$S" batch report --db "$T/$name.db" --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["states"]["done"])') ;;
  esac
  python3 - "$name" "$t0" "$t1" "$T/$name.log" "$N" "$RATE" "$ok" >>"$T/rows" <<'PY'
import json, sys
name, t0, t1, log, n, rate, ok = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
st = [json.loads(l)["status"] for l in open(log)]
calls, r429 = len(st), sum(1 for s in st if s == 429)
ideal = n / rate
label = {"rate": "stagger, --rate 100 --burst 20", "adaptive": "stagger, adaptive (no rate)",
         "naive": "naive: 50 workers, 1 s sleep on 429"}[name]
print("%-38s %8.1f s %7.2fx %7d %7.1f%% %6d/%d" % (label, t1 - t0, (t1 - t0) / ideal, calls,
                                                   100.0 * r429 / max(calls, 1), ok, n))
PY
}

echo "bench_batch: $N jobs, server --rate $RATE --burst $BURST, ideal $((N / RATE)) s" >&2
for c in rate adaptive naive; do
  echo "  running: $c" >&2
  run_case "$c"
done
printf '%-38s %10s %8s %7s %8s %8s\n' "client" "time" "/ideal" "calls" "429s" "done"
cat "$T/rows"
