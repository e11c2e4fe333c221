#!/bin/bash
# bench_queue_death.sh BUILD_DIR: how long a work queue takes to finish when
# one of its workers dies (issue #34). Three workers (-j 4 each) share a
# limit of 20/s on JOBS jobs (default 300; BENCH_DEATH_JOBS) against
# `stagger serve --latency 200ms`; after 3 s one is killed with SIGKILL.
# Prints, for --claim-idle at its default (20 s; it was 6 min before claims
# were renewed): the wall time of the queue, the time from the kill until
# the dead worker's jobs were taken over, and the ideal (JOBS / 20 s).
# Only 127.0.0.1; every run capped by timeout(1). Prints figures, asserts
# nothing.
set -eu
B=${1:?usage: bench/bench_queue_death.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
N=${BENCH_DEATH_JOBS:-300}
T=$(mktemp -d /tmp/stg_bench_death.XXXXXX)
PIDS=""
cleanup() {
  for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
RPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  >"$T/redis.out" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 100); do [ "$(redis-cli -p "$RPORT" ping 2>/dev/null)" = PONG ] && break; sleep 0.05; done
"$S" serve --port 0 --latency 200ms >"$T/serve.out" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 100); do [ -s "$T/serve.out" ] && break; sleep 0.05; done
URL=$(sed -n '1s|^listening on \(http://127.0.0.1:[0-9]*\)$|\1|p' "$T/serve.out")
for i in $(seq "$N"); do echo "$URL/j/$i"; done >"$T/in.txt"
R="redis://127.0.0.1:$RPORT/death"
pel() { redis-cli -p "$RPORT" XPENDING 'stagger:q:{death}:jobs' workers - + 100000 "$1" | awk 'NR % 4 == 1' | grep -c . || true; }
t0=$(date +%s%N)
timeout 300 "$S" batch --queue "$R" --worker a -j 4 --rate 20 --burst 4 --progress none -q \
  "$T/in.txt" >/dev/null 2>&1 &
PA=$!; PIDS="$PIDS $PA"
for _ in $(seq 200); do [ "$(redis-cli -p "$RPORT" HGET 'stagger:q:{death}:meta' total)" = "$N" ] && break; sleep 0.05; done
timeout 300 "$S" batch --queue "$R" --worker b -j 4 --rate 20 --burst 4 --progress none -q >/dev/null 2>&1 &
PB=$!; PIDS="$PIDS $PB"
"$S" batch --queue "$R" --worker c -j 4 --rate 20 --burst 4 --progress none -q >/dev/null 2>&1 &
PC=$!; PIDS="$PIDS $PC"
sleep 3
held=$(pel c)
kill -9 "$PC"
tk=$(date +%s%N)
taken=""
while kill -0 "$PA" 2>/dev/null || kill -0 "$PB" 2>/dev/null; do
  [ -z "$taken" ] && [ "$(pel c)" = 0 ] && taken=$(date +%s%N)
  sleep 0.1
done
t1=$(date +%s%N)
[ -z "$taken" ] && [ "$(pel c)" = 0 ] && taken=$t1
wait "$PA" 2>/dev/null || true
wait "$PB" 2>/dev/null || true
done_n=$(redis-cli -p "$RPORT" HGET 'stagger:q:{death}:counts' done)
printf '| %s jobs, 3 workers, one killed at 3 s holding %s | queue wall %.1f s | taken over %.1f s after the kill | ideal %.1f s | done %s |\n' \
  "$N" "$held" "$(echo "($t1 - $t0) / 1000000000" | bc -l)" \
  "$(echo "(${taken:-$t1} - $tk) / 1000000000" | bc -l)" "$(echo "$N / 20" | bc -l)" "${done_n:-0}"
