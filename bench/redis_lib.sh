# redis-server on 127.0.0.1 for the benches that measure through it
# (sourced by bench_prio.sh and bench_redis.sh). Only loopback is listened on.
#
# redis_bench_start NAME: redis-server on a free loopback port with
# persistence off (sets PORT and PID), a scratch file OUT, and a trap that
# stops the server and removes OUT at exit; returns when the server answers,
# or exits 1 naming NAME after 5 s.
redis_bench_start() {
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    >/dev/null 2>&1 &
  PID=$!
  OUT=$(mktemp)
  trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$OUT"' EXIT INT TERM
  _ri=0
  until redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; do
    _ri=$((_ri + 1))
    [ $_ri -lt 100 ] || { echo "$1: redis-server did not start" >&2; exit 1; }
    sleep 0.05
  done
}
