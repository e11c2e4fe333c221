# One limit shared through Redis (stagger batch --limiter): four processes
# together stay within burst + rate * t of Redis time; without --rate four
# processes learn one adaptive rate in Redis (every send admitted by the one
# key, a 429 turns it on); Redis killed mid-run stops a run without a
# fallback (jobs stay pending, a re-run finishes them), makes fetch exit 6,
# and is survived with --limiter-fallback local:SHARE. Starts its own
# redis-server and stagger serve on 127.0.0.1 and stops them.
#
# Every bound comes from the protocol, so a busy machine cannot break it:
# counts against burst + rate * t with t measured on Redis's clock around
# the run, and events ordered by waiting for them (a line in a log), never
# by a sleep. How few 429s the shared adaptive rate costs, and how close to
# the limit it settles, are figures of bench/bench_redis.sh, not checks.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "redis-server or redis-cli missing: run make deps" >&2; exit 1; }
scratch limiter
# The EXIT trap runs in the script only. bash also runs it in a forked
# child that gets a fatal signal before its exec (a background job being
# started): there it removed $T and stopped Redis and the server under the
# running script ("No such file" later). Such a signal comes from anyone
# killing a stale pid (pids wrap at 32768 here, and tests that kill the
# pids of processes they already reaped run beside this one), so the
# cleanup also kills only live jobs of this shell (jobs -rp), never a
# remembered pid that may belong to someone else by now.

. "$(dirname "$0")/redis_lib.sh"
# start_server NAME: stagger serve logging to $T/NAME.log; sets SPID, PORT.
start_server() { _n=$1; shift; serve_start "$_n" --log "$T/$_n.log" "$@"; SPID=$SRV_PID; }
# stop PID: SIGTERM it if it is still a running job of this shell, and reap it.
stop() {
  if serve_running "$1"; then kill "$1" 2>/dev/null || true; fi
  wait "$1" 2>/dev/null || true
}

# run4 TAG ARGS...: 4 batch processes of 60 jobs each (keys TAG<n>-NNN in
# $T/TAGkeys<n>.txt, databases $T/TAG<n>.db), 8 workers each, against
# $PORT with ARGS, run together; each must finish with exit 0.
run4() {
  _tag=$1; shift
  _pids=""
  for _w in 1 2 3 4; do
    seq -f "$_tag$_w-%03g" 1 60 >"$T/${_tag}keys$_w.txt"
    "$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/${_tag}keys$_w.txt" \
      --db "$T/$_tag$_w.db" --concurrency 8 "$@" >"$T/$_tag$_w.out" 2>"$T/$_tag$_w.err" &
    _pids="$_pids $!"
  done
  _w=0
  for _p in $_pids; do
    _w=$((_w + 1))
    set +e; wait "$_p"; _rc=$?; set -e
    check "$_tag: worker $_w finished (exit $_rc): $(cat "$T/$_tag$_w.err")" [ "$_rc" = 0 ]
  done
}

# The trap guard holds: children signalled at once after their fork (most
# of them before their exec) leave $T in place.
for _ in $(seq 20); do
  sleep 0 >"$T/guard.out" &
  kill -TERM $! 2>/dev/null || true
  wait $! 2>/dev/null || true
done
check "a child signalled before its exec runs no cleanup (\$T is still there)" [ -d "$T" ]

RPORT=$(free_port)
start_redis
start_server shared

# ---- 4 processes, one limit: 50/s, burst 10 ------------------------------------
RATE=50; BURST=10
# Redis admits at most burst + rate * t by its own clock, whatever the
# number of processes. Every request is sent at or after its admitted slot,
# and every process has sent all of its requests before it exits, so the
# 240 admissions lie between Redis TIME read before the first process
# starts and after the last one exits: 240 <= burst + rate * (t1 - t0),
# with no allowance. Each process alone would take ~1 s (4 unshared limits
# send 240 in about 1.2 s, far above 10 + 50 * 1.2 = 70).
t0=$(redis_time)
run4 w --rate $RATE --burst $BURST --limiter "redis://127.0.0.1:$RPORT/api"
t1=$(redis_time)
stop "$SPID"
check "240 requests reached the server" [ "$(grep -c '"/track/' "$T/shared.log")" = 240 ]
check "4 processes stay within burst + rate * t of Redis time" python3 - $t0 $t1 $RATE $BURST <<'PY'
import sys
t0, t1, rate, burst = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
bound = burst + rate * (t1 - t0) / 1e6
print(f"  240 admissions over {(t1 - t0) / 1e6:.2f} s of Redis time; bound {bound:.1f}")
sys.exit(0 if 240 <= bound else 1)
PY

# ---- 4 processes, one limit, token leases: 400/s, burst 40 -----------------------
# --limiter-lease 40ms: each process takes its tokens in leases, so Redis
# runs fewer scripts than there are requests (each process admits ~100/s,
# 4 tokens per 40 ms lease; the exact share is bench_redis.sh's figure),
# and the bound holds as above.
start_server leased
redis-cli -p "$RPORT" config resetstat >/dev/null
t0=$(redis_time)
run4 l --rate 400 --burst 40 --limiter "redis://127.0.0.1:$RPORT/leased" --limiter-lease 40ms
t1=$(redis_time)
stop "$SPID"
calls=$(redis-cli -p "$RPORT" info commandstats | tr -d '\r' |
  sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
check "240 leased requests reached the server" [ "$(grep -c '"/track/' "$T/leased.log")" = 240 ]
check "leases: fewer script calls ($calls) than requests (240)" [ "${calls:-999}" -lt 240 ]
check "4 leasing processes stay within burst + rate * t of Redis time" \
  python3 - $t0 $t1 400 40 <<'PY'
import sys
t0, t1, rate, burst = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
bound = burst + rate * (t1 - t0) / 1e6
print(f"  240 admissions over {(t1 - t0) / 1e6:.2f} s of Redis time; bound {bound:.1f}")
sys.exit(0 if 240 <= bound else 1)
PY
check "a bad --limiter-lease is refused" sh -c \
  "! '$S' batch --url http://127.0.0.1:1/{} /dev/null --limiter-lease soon 2>/dev/null"

# ---- 4 processes, no --rate: one adaptive rate, learned in Redis ---------------------
# The server allows 40/s (burst 5). Each process alone would learn its own
# rate from its own 429s; sharing, every send of every process is admitted
# by the one key (its admission count is the server's request count), and a
# 429 seen by one slows all of them.
start_server learn --rate 40 --burst 5
run4 a --limiter "redis://127.0.0.1:$RPORT/learn"
stop "$SPID"
calls=$(grep -c '"/track/' "$T/learn.log")
admitted=$(redis-cli -p "$RPORT" hget stagger:ad:learn n)
check "every send of the 4 processes was admitted by the shared key ($admitted of $calls)" \
  [ "$admitted" = "$calls" ]
check "the shared rate turned on (a 429 was seen)" python3 - "$T/learn.log" <<'PY'
import json, sys
sys.exit(0 if any(json.loads(l)["status"] == 429 for l in open(sys.argv[1])) else 1)
PY
# Once it paced, the engines asked by class (their requests are normal):
# the script wrote normal's demand mark on the key (docs/priorities.md,
# "Adaptive"), and the plain fields are the adaptive model's own.
check "the engines asked the shared adaptive rate by class" \
  [ "$(redis-cli -p "$RPORT" hexists stagger:ad:learn cd1)" = 1 ]
# (How few 429s that costs, and how close to 40/s it settles: bench_redis.sh.)
# fetch shares it too: a 429 seen by one fetch turns the key's rate on for
# all. The server answers the first request of each path 429 (Retry-After
# 1 s), whatever the timing: each fetch is admitted twice, and the key is on.
start_server fetchsrv --fail-first 1 --fail-retry-after 1
expect_exit "fetch --limiter (adaptive): 429, Retry-After, then done" 0 "$S" fetch -s -o /dev/null \
  --limiter "redis://127.0.0.1:$RPORT/fa" "http://127.0.0.1:$PORT/f/1"
expect_exit "fetch --limiter (adaptive): a second fetch, paced" 0 "$S" fetch -s -o /dev/null \
  --limiter "redis://127.0.0.1:$RPORT/fa" "http://127.0.0.1:$PORT/f/2"
stop "$SPID"
check "fetch: the 429s reached the shared key (on, 4 admissions)" \
  [ "$(redis-cli -p "$RPORT" hmget stagger:ad:fa en n | tr '\n' ' ')" = "1 4 " ]
expect_exit "batch --limiter with --rate 0 is refused" 2 "$S" batch -q --url "http://127.0.0.1:1/{}" \
  "$T/akeys1.txt" --db "$T/bad.db" --rate 0 --limiter "redis://127.0.0.1:$RPORT/x"

# ---- Redis killed mid-run, no fallback: the run stops, nothing is lost -------------
start_server nofb
seq -f "n%03g" 1 150 >"$T/keysn.txt"
"$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/keysn.txt" --db "$T/n.db" \
  --concurrency 5 --rate 50 --limiter "redis://127.0.0.1:$RPORT/nofb" >"$T/n.out" 2>"$T/n.err" &
BP=$!
# Kill Redis once the first request arrived: 150 jobs at 50/s (burst 50)
# take at least 2 s, so the run is still going.
check "no fallback: the run started" wait_grep "$T/nofb.log" '/track/'
stop "$RPID"
set +e; wait "$BP"; rc=$?; set -e
check "no fallback: stops with exit 6 (got $rc)" [ "$rc" = 6 ]
check "no fallback: says why" grep -q "shared limiter is unavailable" "$T/n.err"
start_redis
set +e
"$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/keysn.txt" --db "$T/n.db" \
  --concurrency 5 --rate 50 --limiter "redis://127.0.0.1:$RPORT/nofb" >"$T/n2.out" 2>"$T/n2.err"
rc=$?
set -e
check "re-run with Redis back finishes (exit $rc): $(cat "$T/n2.err")" [ "$rc" = 0 ]
stop "$SPID"
check "no fallback: every key done exactly once in the database" python3 - "$T/n.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select state, count(*) from jobs group by state").fetchall()
print("  states:", rows)
sys.exit(0 if rows == [("done", 150)] else 1)
PY
check "no fallback: every key reached the server" python3 - "$T/nofb.log" <<'PY'
import json, sys
keys = {json.loads(l)["path"] for l in open(sys.argv[1]) if "/track/" in l}
sys.exit(0 if len(keys) == 150 else 1)
PY

# ---- fetch: Redis killed between two attempts, no fallback: exit 6 ---------------------
# Every answer is 503 + Retry-After 1 s, so fetch keeps retrying (20 retries:
# the kill below comes long before they run out). Redis is killed once the
# first attempt reached the server; the next attempt's acquire fails, after
# an HTTP answer was seen: that is "the shared limiter became unavailable"
# (exit 6), not "HTTP error after retries" (exit 3).
start_server fetchdie
"$S" fetch -s -o /dev/null --retries 20 --deadline 0 --rate 100 \
  --limiter "redis://127.0.0.1:$RPORT/fdie" "http://127.0.0.1:$PORT/status/503?retry_after=1" \
  >"$T/fdie.out" 2>"$T/fdie.err" &
FP=$!
check "fetch: the first attempt reached the server" wait_grep "$T/fetchdie.log" /status/503
stop "$RPID"
set +e; wait "$FP"; rc=$?; set -e
stop "$SPID"
check "fetch: Redis gone between attempts exits 6 (got $rc): $(cat "$T/fdie.err")" [ "$rc" = 6 ]
check "fetch: says where Redis was" grep -q "Redis at 127.0.0.1:$RPORT" "$T/fdie.err"
start_redis

# ---- Redis killed mid-run, fallback local:0.5: the run goes on -----------------------
start_server fb
seq -f "f%03g" 1 400 >"$T/keysf.txt"
"$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/keysf.txt" --db "$T/f.db" \
  --concurrency 5 --rate 60 --burst 10 --limiter "redis://127.0.0.1:$RPORT/fb" \
  --limiter-fallback local:0.5 >"$T/f.out" 2>"$T/f.err" &
BP=$!
# Kill Redis once requests arrive, bring it back once the run says it fell
# back: 400 jobs at 60/s (30/s while local) take more than 6 s, so both
# hand-overs happen mid-run.
check "fallback: the run started" wait_grep "$T/fb.log" '/track/'
stop "$RPID"
check "fallback: the run fell back" wait_grep "$T/f.err" "falling back to local bucket"
start_redis
set +e; wait "$BP"; rc=$?; set -e
stop "$SPID"
check "fallback: finishes (exit $rc): $(cat "$T/f.err")" [ "$rc" = 0 ]
check "fallback: says it falls back" grep -q "falling back to local bucket" "$T/f.err"
check "fallback: says Redis is back" grep -q "back; using the shared limiter again" "$T/f.err"
check "fallback: every job done" [ "$("$S" batch report --db "$T/f.db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["states"]["done"])')" = 400 ]

# ---- --share-breaker: one process trips it, another sees it open at once -------------
serve_start brk --log "$T/brk.log" --outage 0s+60s
SPID=$SRV_PID
seq -f "a%02g" 1 10 >"$T/keysa.txt"
seq -f "b%02g" 1 10 >"$T/keysb.txt"
for w in a b; do
  set +e
  "$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/keys$w.txt" --db "$T/brk$w.db" \
    --concurrency 1 --rate 100 --retries 0 --breaker 3 --on-breaker defer --share-breaker \
    --limiter "redis://127.0.0.1:$RPORT/brk" >"$T/brk$w.out" 2>"$T/brk$w.err"
  set -e
done
stop "$SPID"
check "shared breaker: A sent 3 requests, then its breaker opened" \
  [ "$(grep -c '"/track/a' "$T/brk.log")" = 3 ]
check "shared breaker: B saw it open and sent nothing" \
  [ "$(grep -c '"/track/b' "$T/brk.log")" = 0 ]
check "shared breaker: B's jobs are deferred as breaker_open" \
  [ "$("$S" batch export --db "$T/brkb.db" | grep -c 'breaker')" = 10 ]

# ---- usage ----------------------------------------------------------------------------
expect_exit "bad --limiter URL" 2 "$S" batch -q --url "http://127.0.0.1:1/{}" "$T/keysf.txt" --db "$T/u.db" --rate 5 --limiter "http://x"
expect_exit "bad fallback" 2 "$S" batch -q --url "http://127.0.0.1:1/{}" "$T/keysf.txt" --db "$T/u.db" --rate 5 --limiter "redis://127.0.0.1:$RPORT/k" --limiter-fallback local:7
finish
