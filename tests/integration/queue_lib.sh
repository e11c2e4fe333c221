# Helpers of the work-queue tests (test_queue_*.sh): a redis-server of their
# own on 127.0.0.1 (started as a job of the test's shell, stopped by it),
# Redis time, and reading a consumer's pending entries. Source after lib.sh
# and serve_lib.sh, with T set.
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "redis-server or redis-cli missing: run make deps" >&2; exit 1; }
. "$(dirname "$0")/redis_lib.sh"

# redis_pair: a primary on a free port (PP, its pid PRIMARY, log $T/p.out)
# and its replica (RP, log $T/r.out), persistence off; returns when both
# answer and the replica is in sync (hang guards of 10 s).
redis_pair() {
  PP=$(free_port)
  RP=$(free_port)
  redis-server --port "$PP" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
    --daemonize no >"$T/p.out" 2>&1 &
  PRIMARY=$!
  redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
    --replicaof 127.0.0.1 "$PP" --daemonize no >"$T/r.out" 2>&1 &
  redis_up "$PP" "$PRIMARY" "$T/p.out"
  redis_up "$RP" $! "$T/r.out"
  for _ in $(seq 200); do
    redis-cli -p "$RP" info replication | grep -q 'master_link_status:up' && return 0
    sleep 0.05
  done
}
# pending_ids NAME WORKER: the job ids in WORKER's pending list of queue NAME.
pending_ids() {
  _pk="stagger:q:{$1}:jobs"
  redis-cli -p "$RPORT" XPENDING "$_pk" workers - + 100000 "$2" | awk 'NR % 4 == 1' |
    while read -r _e; do
      [ -n "$_e" ] && redis-cli -p "$RPORT" XRANGE "$_pk" "$_e" "$_e" | sed -n 3p
    done
}
# wait_lines FILE N: until FILE has at least N lines (a hang guard of 120 s,
# not a timing bound: the lines come as the run goes).
wait_lines() {
  for _ in $(seq 1 1200); do
    [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "FAIL: $1 never reached $2 lines" >&2; return 1
}
# log_count FILE PATTERN N: until at least N lines of FILE hold PATTERN (a
# hang guard of 30 s: stagger serve writes its log in blocks, flushed every
# 200 ms, so a line may come a little after its request was answered).
log_count() {
  for _ in $(seq 300); do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
    sleep 0.1
  done
  return 0 # the check that follows says what is missing
}
