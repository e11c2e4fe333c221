# #14 Low, `stagger batch` stopping: a shared limiter unreachable at start
# is exit 6 (not 1: "some jobs failed"); a limiter lost mid-run is exit 6
# and leaves no job inflight; the run's totals in the report survive
# kill -9 (committed with each outcome: what the report misses is bounded
# by the jobs in flight at the kill); the database and --out bodies are
# created 0600.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_stops
PIDS=""
. "$(dirname "$0")/batch_lib.sh"
umask 022

db_int() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$1" "$2"; }

# ---- files are 0600 ------------------------------------------------------------------
serve_start plain --log "$T/plain.log"
PLAIN=$PORT
for i in $(seq 1 5); do echo "http://127.0.0.1:$PLAIN/m/$i"; done >"$T/m.txt"
expect_exit "a small batch" 0 "$S" batch -q --db "$T/m.db" --out "$T/bodies" --log "$T/m.jsonl" "$T/m.txt"
check "the --log file is 0600" [ "$(stat -c %a "$T/m.jsonl")" = 600 ]
expect_exit "export to a file" 0 "$S" batch export --db "$T/m.db" -o "$T/m.export"
check "the export file is 0600" [ "$(stat -c %a "$T/m.export")" = 600 ]

# ---- a body over --max-body is never stored as done -------------------------------------
# The server's default answer for /m/N is {"path":"/m/N","ok":true}: 25 bytes and more.
expect_exit "bodies over --max-body: the jobs failed (exit 1)" 1 "$S" batch -q --db "$T/mb.db" \
  --max-body 10 "$T/m.txt"
check "bodies over --max-body: 5 failed, none done" \
  [ "$(db_int "$T/mb.db" "SELECT count(*) FROM jobs WHERE state = 'failed'")" = 5 ]
check "bodies over --max-body: export says why" \
  [ "$("$S" batch export --db "$T/mb.db" | grep -c 'body larger than --max-body')" = 5 ]
check "the database is 0600 (umask 022)" [ "$(stat -c %a "$T/m.db")" = 600 ]
check "the --out directory is 0700" [ "$(stat -c %a "$T/bodies")" = 700 ]
check "5 bodies written" [ "$(ls "$T/bodies" | wc -l)" = 5 ]
for f in "$T"/bodies/*; do
  check "body $(basename "$f") is 0600" [ "$(stat -c %a "$f")" = 600 ]
done

# ---- the shared limiter ------------------------------------------------------------------
if "$S" batch --help | grep -q -- '--limiter redis'; then
  DEAD=$(free_port)
  expect_exit "--limiter unreachable at start: exit 6" 6 "$S" batch -q --db "$T/l0.db" --rate 5 \
    --limiter "redis://127.0.0.1:$DEAD/k" "$T/m.txt"
  check "says the limiter is the problem" grep -q "shared limiter" /tmp/stg_err.$$

  if command -v redis-server >/dev/null; then
    . "$(dirname "$0")/redis_lib.sh"
    start_redis
    PIDS="$PIDS $RPID"
    # Every answer takes 400 ms, so when Redis goes the slots are full of
    # requests in flight; the first refused acquire stops the run.
    serve_start slow --slow-body-prob 1 --slow-body-ms 400
    for i in $(seq 1 200); do echo "http://127.0.0.1:$PORT/s/$i"; done >"$T/s.txt"
    "$S" batch -q --db "$T/l.db" --concurrency 6 --rate 50 --limiter "redis://127.0.0.1:$RPORT/k" \
      "$T/s.txt" >"$T/l.out" 2>"$T/l.err" &
    BP=$!
    PIDS="$PIDS $BP"
    wait_db "$T/l.db" "SELECT count(*) >= 6 FROM jobs WHERE state = 'done'" || true
    kill "$RPID"; wait "$RPID" 2>/dev/null || true
    set +e; wait "$BP"; rc=$?; set -e
    check "limiter lost mid-run: exit 6 (got $rc): $(cat "$T/l.err")" [ "$rc" = 6 ]
    check "says why" grep -q "shared limiter is unavailable" "$T/l.err"
    check "no job left inflight ($(db_int "$T/l.db" "SELECT count(*) FROM jobs WHERE state = 'inflight'"))" \
      [ "$(db_int "$T/l.db" "SELECT count(*) FROM jobs WHERE state = 'inflight'")" = 0 ]
    check "the jobs not done wait as pending" \
      [ "$(db_int "$T/l.db" "SELECT count(*) FROM jobs WHERE state NOT IN ('done', 'pending')")" = 0 ]
  fi
else
  echo "skipped: built without Redis (no --limiter)"
fi

# ---- the report's totals survive kill -9 ------------------------------------------------
# The server refuses above 40/s (burst 4) and the client sends up to 200/s:
# many 429s. Killed once a few outcomes are committed (before the first
# periodic save, which a kill used to lose entirely) and later on.
for k in 3 30; do
  serve_start "k$k" --rate 40 --burst 4 --log "$T/k$k.log"
  KPID=$SRV_PID
  for i in $(seq 1 400); do echo "http://127.0.0.1:$PORT/k/$i"; done >"$T/k$k.txt"
  "$S" batch -q --db "$T/k$k.db" --concurrency 4 --rate 200 --burst 4 "$T/k$k.txt" >/dev/null 2>&1 &
  BP=$!
  wait_db "$T/k$k.db" "SELECT count(*) >= $k FROM jobs WHERE state = 'done'" || true
  kill -9 "$BP" 2>/dev/null || true
  wait "$BP" 2>/dev/null || true
  done_n=$(db_int "$T/k$k.db" "SELECT count(*) FROM jobs WHERE state = 'done'")
  inflight=$(db_int "$T/k$k.db" "SELECT count(*) FROM jobs WHERE state = 'inflight'")
  serve_stop "$KPID" || true
  j=$("$S" batch report --db "$T/k$k.db" --json)
  seen=$(wc -l <"$T/k$k.log")
  s429=$(grep -c '"status":429' "$T/k$k.log" || true)
  # 6 attempts at most per job (the policy), for the jobs in flight at the kill
  jcheck "killed after $done_n done: calls = requests the server saw, but those of the $inflight in flight ($seen seen)" "$j" \
    "0 <= $seen - j['calls'] <= $inflight * 6 and j['calls'] >= $done_n >= $k"
  jcheck "killed after $done_n done: 429s likewise ($s429 seen)" "$j" \
    "0 <= $s429 - j['status_429'] <= $inflight * 6"
  jcheck "killed after $done_n done: calls = the jobs' attempts" "$j" \
    "j['calls'] == $(db_int "$T/k$k.db" "SELECT sum(attempts) FROM jobs")"
done

finish
