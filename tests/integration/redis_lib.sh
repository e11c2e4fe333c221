# A redis-server of a test's own, on 127.0.0.1, for the shell tests that need
# one (the queue's, the shared limiter's, the shared quota's): started as a
# job of the test's shell, so its cleanup stops it by that job's pid, never a
# remembered pid someone else may hold by now. Source after lib.sh, with T
# set; the caller checks that redis-server is installed (and skips or fails
# as it must).
#
# Persistence is off unless the arguments say otherwise, and its files go to
# $T. Every wait is a hang guard (10 s), not a timing bound: the loops end
# as soon as Redis answers.

# redis_up PORT PID LOG: until the redis-server PID on PORT answers; exits
# the test with LOG's tail when it does not.
redis_up() {
  for _ in $(seq 1 200); do
    [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  echo "redis-server did not start: $(tail -n 5 "$3")" >&2
  exit 1
}
# start_redis [ARGS...]: redis-server on $RPORT (a free one is picked when
# RPORT is unset or empty); sets RPORT and RPID, and returns once it answers.
start_redis() {
  [ -n "${RPORT:-}" ] || RPORT=$(free_port)
  redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$T" "$@" >>"$T/redis.out" 2>&1 &
  RPID=$!
  redis_up "$RPORT" "$RPID" "$T/redis.out"
}
# redis_time: Redis's clock (TIME) in microseconds.
redis_time() { redis-cli -p "$RPORT" time | tr -d '\r' | { read -r s; read -r u; echo $((s * 1000000 + u)); }; }
