# `stagger fetch --limiter`: when Redis dies between two attempts the request
# stops with the shared limiter's own exit status (6), as batch's does, not
# with the status of the answer before (3); Redis unreachable at start is 1.
# Starts its own redis-server and stagger serve on 127.0.0.1 and stops them
# by PID.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1; then
  skip "stagger fetch not built: skipped"
fi
command -v redis-server >/dev/null ||
  { echo "redis-server missing: run make deps" >&2; exit 1; }
T=$(mktemp -d /tmp/stg_fetch_lim.XXXXXX)
RPID= SRV_PID=
cleanup() {
  in_script || return 0
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT

. "$(dirname "$0")/redis_lib.sh"
start_redis

"$S" serve --bind 127.0.0.1 --port 0 --threads 2 --log "$T/srv.log" > "$T/srv.out" &
SRV_PID=$!
PORT=$(listen_port "$T/srv.out" "$SRV_PID")
[ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }
BASE=http://127.0.0.1:$PORT
LIM=redis://127.0.0.1:$RPORT/fetchkey

# Sanity: with Redis up the shared limit admits the request.
expect_exit "Redis up: exit 0" 0 "$S" fetch -s --limiter "$LIM" --rate 10 -o /dev/null "$BASE/ok"

# A 503 that asks for 2 s, then Redis dies during the wait: the second
# acquire cannot be answered.
"$S" fetch --limiter "$LIM" --rate 10 --retries 3 -o /dev/null \
  "$BASE/status/503?retry_after=2" 2> "$T/die.err" &
fp=$!
for _ in $(seq 1 100); do
  grep -q '"/status/503"' "$T/srv.log" 2>/dev/null && break
  sleep 0.05
done
kill "$RPID"; wait "$RPID" 2>/dev/null || true; RPID=
set +e; wait $fp; got=$?; set -e
check "Redis died mid-run: exit 6 (got $got; $(cat "$T/die.err"))" [ "$got" = 6 ]
check "Redis died mid-run: one attempt reached the server" \
  [ "$(grep -c '"/status/503' "$T/srv.log")" = 1 ]

# Unreachable from the start: exit 6 (the limiter exit, as in batch) before anything is sent.
expect_exit "Redis down at start: exit 6" 6 "$S" fetch -s --limiter "$LIM" --rate 10 "$BASE/never"
check "Redis down at start: nothing sent" [ "$(grep -c '"/never"' "$T/srv.log" || true)" = 0 ]

finish
