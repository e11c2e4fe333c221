# `stagger batch` against `stagger serve` on 127.0.0.1: the three input
# formats, done / failed / deferred / review, --retry-deferred, the breaker,
# a server wait beyond the window, malformed input and --strict, --out,
# report and export, SIGINT and resume.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch
SRV_PIDS=""

# start_server NAME [ARGS...]: sets PORT and SRV_PID; request log in $T/NAME.log.
start_server() { _n=$1; shift; serve_start "$_n" --log "$T/$_n.log" "$@"; }
stop_server() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# pyexport NAME DB PYTHON_EXPR: rows = the JSONL export as a list, by = {id: row}.
pyexport() {
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! "$S" batch export --db "$2" --bodies | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
by = {r["id"]: r for r in rows}
sys.exit(0 if eval(sys.argv[1]) else 1)' "$3"; then
    fail "$1: $3"
  fi
}
report() { "$S" batch report --db "$1" --json; }
. "$(dirname "$0")/batch_lib.sh"

# ---- 1. URL list: done and failed (non-retryable), default --db ------------
start_server main
M=$PORT
cat >"$T/urls.txt" <<EOF
# lookups
http://127.0.0.1:$M/track/a1
http://127.0.0.1:$M/status/404
http://127.0.0.1:$M/track/a2

http://127.0.0.1:$M/status/400
http://127.0.0.1:$M/status/201
EOF
expect_exit "404 and 400 are failed: exit 1" 1 "$S" batch -q "$T/urls.txt"
check "default db beside the input, named after it" test -f "$T/urls.txt.stagger.db"
j=$(report "$T/urls.txt.stagger.db")
jcheck "url list counts" "$j" 'j["jobs"] == 5 and j["states"]["done"] == 3 and j["states"]["failed"] == 2 and j["calls"] == 5'
pyexport "404 failed once, not retried" "$T/urls.txt.stagger.db" \
  'by["3"]["state"] == "failed" and by["3"]["status"] == 404 and by["3"]["attempts"] == 1 and by["3"]["reason"] == "status_not_retryable" and "404" in by["3"]["error"]'
pyexport "400 failed, 201 done" "$T/urls.txt.stagger.db" \
  'by["6"]["state"] == "failed" and by["6"]["status"] == 400 and by["7"]["state"] == "done" and by["7"]["status"] == 201 and by["2"]["line"] == 2'
pyexport "export columns" "$T/urls.txt.stagger.db" \
  'all(set(("id","state","status","attempts","error","job","line","url","method","reason","file","finished_at")) <= set(r) for r in rows) and by["2"]["error"] is None'
sleep 0.3
before=$(wc -l <"$T/main.log")
expect_exit "re-run: nothing left to send, still exit 1" 1 "$S" batch -q "$T/urls.txt"
sleep 0.3
check "re-run sent nothing" [ "$(wc -l <"$T/main.log")" = "$before" ]
"$S" batch report --db "$T/urls.txt.stagger.db" >"$T/rep.txt"
check "text report" grep -q 'failed *2 *non-retryable' "$T/rep.txt"

# ---- 2. key file + URL template, --out, CSV export ----------------------------
seq -f 'K%03g' 1 20 >"$T/keys.txt"
expect_exit "template: all done" 0 "$S" batch -q --url "http://127.0.0.1:$M/track/{}" \
  --db "$T/t.db" --out "$T/bodies" "$T/keys.txt"
check "one body file per job" [ "$(ls "$T/bodies" | wc -l)" = 20 ]
check "body of K001" grep -q '"/track/K001"' "$T/bodies/K001"
"$S" batch export --db "$T/t.db" --format csv -o "$T/t.csv"
check "csv header" [ "$(head -1 "$T/t.csv" | tr -d '\r')" = "id,job,line,state,status,attempts,error,reason,method,url,file,finished_at,duration_ms" ]
check "csv rows" [ "$(wc -l <"$T/t.csv")" = 21 ]
check "csv row" grep -q "^K007,7,7,done,200,1,,,GET,http://127.0.0.1:$M/track/K007,K007," "$T/t.csv"
pyexport "bodies not in the db with --out" "$T/t.db" 'all("body" not in r and r["file"] == r["id"] for r in rows)'

# ---- 3. JSONL, bad lines with numbers, --strict ---------------------------------
cat >"$T/req.jsonl" <<EOF
{"id": "p1", "method": "POST", "url": "http://127.0.0.1:$M/echo", "headers": {"Idempotency-Key": "idem-1", "X-Trace": "t-1"}, "body": {"n": 1}}
{"id": "g1", "url": "http://127.0.0.1:$M/track/g1"}
not json at all
{"id": "x", "method": "FETCH", "url": "http://127.0.0.1:$M/x"}
{"id": "nourl"}
EOF
expect_exit "--strict refuses bad lines: exit 5" 5 "$S" batch --strict --db "$T/j.db" "$T/req.jsonl"
check "line 3 reported" grep -q "req.jsonl:3: bad JSON" /tmp/stg_err.$$
check "line 4 reported" grep -q "req.jsonl:4: unknown method 'FETCH'" /tmp/stg_err.$$
check "line 5 reported" grep -q "req.jsonl:5: no URL" /tmp/stg_err.$$
check "--strict wrote nothing" test ! -e "$T/j.db"
expect_exit "without --strict the good lines run" 0 "$S" batch -q --db "$T/j.db" "$T/req.jsonl"
check "bad lines still reported" grep -q "req.jsonl:4: unknown method" /tmp/stg_err.$$
check "report lists bad lines" sh -c "'$S' batch report --db '$T/j.db' --bad-lines | grep -q 'req.jsonl:5: no URL'"
jcheck "jsonl counts" "$(report "$T/j.db")" 'j["states"]["done"] == 2 and j["bad_lines"] == 3'
pyexport "POST sent with body, header and key" "$T/j.db" \
  'json.loads(by["p1"]["body"])["method"] == "POST" and json.loads(by["p1"]["body"])["headers"]["Idempotency-Key"] == "idem-1" and json.loads(by["p1"]["body"])["headers"]["X-Trace"] == "t-1" and json.loads(by["p1"]["body"])["body"] == "{\"n\":1}"'

# ---- 4. a server wait beyond the window: deferred at once ---------------------
cat >"$T/wait.txt" <<EOF
http://127.0.0.1:$M/status/503?retry_after=120
http://127.0.0.1:$M/status/429?retry_after=120
EOF
t0=$(date +%s%N)
expect_exit "long Retry-After: exit 3" 3 "$S" batch -q --db "$T/w.db" "$T/wait.txt"
took=$(( ($(date +%s%N) - t0) / 1000000 ))
# "At once": within the longest wait honoured (30 s), not after the 120 s
# the server asked for (the 503's hint once held the host that long).
check "beyond the window: deferred within it, not after the hint ($took ms)" [ "$took" -lt 30000 ]
pyexport "deferred: server wait too long" "$T/w.db" \
  'all(r["state"] == "deferred" and r["reason"] == "server_wait_too_long" and r["attempts"] == 1 for r in rows) and by["1"]["status"] == 503 and by["2"]["status"] == 429'

# ---- 5. --retries 0 against a limited server: deferred; --retry-deferred ------
start_server lim --rate 20 --burst 1
L=$PORT
seq 1 20 >"$T/k20.txt"
expect_exit "retries 0: some deferred, exit 3" 3 "$S" batch -q --url "http://127.0.0.1:$L/d/{}" \
  --db "$T/d.db" --retries 0 --rate 0 "$T/k20.txt"
jcheck "most deferred" "$(report "$T/d.db")" 'j["states"]["deferred"] >= 10 and j["states"]["deferred"] + j["states"]["done"] == 20 and j["status_429"] == j["states"]["deferred"]'
pyexport "deferred rows keep the 429" "$T/d.db" \
  'all(r["status"] == 429 and r["reason"] == "attempts_exhausted" for r in rows if r["state"] == "deferred")'
expect_exit "plain re-run leaves them deferred" 3 "$S" batch -q --url "http://127.0.0.1:$L/d/{}" \
  --db "$T/d.db" --retries 0 --rate 0 "$T/k20.txt"
expect_exit "--retry-deferred finishes them" 0 "$S" batch -q --url "http://127.0.0.1:$L/d/{}" \
  --db "$T/d.db" --retry-deferred --rate 20 --burst 1 "$T/k20.txt"
jcheck "all done after --retry-deferred" "$(report "$T/d.db")" 'j["states"]["done"] == 20 and j["runs"] == 3'
stop_server "$SRV_PID"

# ---- 6. breaker open -> deferral -------------------------------------------------
start_server outage --outage 0s+60s --retry-after none
seq 1 40 >"$T/k40.txt"
expect_exit "outage: exit 3" 3 "$S" batch -q --url "http://127.0.0.1:$PORT/o/{}" --db "$T/b.db" \
  --breaker 5 --on-breaker defer --retries 1 --base 20ms --concurrency 2 "$T/k40.txt"
pyexport "all deferred, most by the open breaker" "$T/b.db" \
  'all(r["state"] == "deferred" for r in rows) and sum(r["reason"] == "breaker_open" for r in rows) >= 30'
stop_server "$SRV_PID"
check "the breaker spared the server" [ "$(wc -l <"$T/outage.log")" -lt 20 ]

# ---- 7. SIGINT: exit 130, nothing in flight, resume ------------------------------
start_server slow --rate 20 --burst 1
seq 1 60 >"$T/k60.txt"
set +e
"$S" batch --progress lines --progress-interval 200ms --url "http://127.0.0.1:$PORT/s/{}" \
  --db "$T/s.db" --rate 20 --burst 1 "$T/k60.txt" >"$T/s.out" 2>"$T/s.err" &
pid=$!
wait_db "$T/s.db" "SELECT count(*) >= 10 FROM jobs WHERE state = 'done'" || true
kill -INT "$pid"
wait "$pid"
rc=$?
set -e
check "SIGINT: exit 130 (got $rc)" [ "$rc" = 130 ]
check "progress lines" grep -q "ended (done" "$T/s.err"
check "resume hint" grep -q "run the same command again" "$T/s.err"
jcheck "after SIGINT: nothing in flight" "$(report "$T/s.db")" 'j["states"]["inflight"] == 0 and j["states"]["pending"] > 0 and j["states"]["done"] > 0 and j["last_run"]["exit_code"] == 130'
# These URLs hold no secret: the database alone is enough to resume.
expect_exit "resume from the database alone finishes" 0 "$S" batch -q --db "$T/s.db" --rate 20 --burst 1
jcheck "all 60 done" "$(report "$T/s.db")" 'j["states"]["done"] == 60 and j["runs"] == 2'
stop_server "$SRV_PID"

# ---- 8. a POST without idempotency key in flight at kill -9 -> review ------------
start_server hang --hang-prob 1
H=$PORT
HANG_PID=$SRV_PID
cat >"$T/post.jsonl" <<EOF
{"id": "np", "method": "POST", "url": "http://127.0.0.1:$H/p", "body": "x"}
{"id": "kp", "method": "POST", "url": "http://127.0.0.1:$H/p", "body": "y", "idempotency_key": "k-kp"}
{"id": "g", "url": "http://127.0.0.1:$H/g"}
EOF
set +e
"$S" batch -q --db "$T/r.db" "$T/post.jsonl" &
pid=$!
wait_db "$T/r.db" "SELECT sent FROM jobs WHERE key = 'np' AND state = 'inflight'" || true
sleep 0.2
kill -9 "$pid"
{ wait "$pid"; } 2>/dev/null
set -e
stop_server "$HANG_PID"
jcheck "killed with 3 in flight" "$(report "$T/r.db")" 'j["states"]["inflight"] == 3'
SRV_PORT=$H start_server norm
expect_exit "resume: the unkeyed POST goes to review, exit 3" 3 "$S" batch -q --db "$T/r.db" "$T/post.jsonl"
pyexport "review, not resent" "$T/r.db" \
  'by["np"]["state"] == "review" and "--retry-review" in by["np"]["error"] and by["kp"]["state"] == "done" and by["g"]["state"] == "done"'
expect_exit "--retry-review resends it" 0 "$S" batch -q --db "$T/r.db" --retry-review "$T/post.jsonl"
stop_server "$SRV_PID"
check "the unkeyed POST was resent once, on request" [ "$(grep -c '"POST","path":"/p"' "$T/norm.log")" = 2 ]

# ---- usage ---------------------------------------------------------------------------
expect_exit "no input: usage" 2 "$S" batch
expect_exit "template without {}" 2 "$S" batch --url "http://127.0.0.1:1/x" "$T/keys.txt"
expect_exit "unknown option" 2 "$S" batch --bogus "$T/keys.txt"
expect_exit "resume from a missing db" 2 "$S" batch --db "$T/none.db"
expect_exit "report on a missing db" 2 "$S" batch report --db "$T/none.db"
expect_exit "bad export format" 2 "$S" batch export --db "$T/t.db" --format xml
expect_exit "help" 0 "$S" batch --help

# ---- 9. --on-breaker wait (the default): the work waits for the host ---------------
# A 1 s outage with no Retry-After: the breaker opens after 3 failures and,
# in wait mode, the jobs wait for it instead of being deferred; when the
# outage is over, a probe closes it and everything finishes.
start_server bwait --outage 0s+1s --retry-after none
seq -f "w%02g" 1 20 >"$T/k20.txt"
expect_exit "wait (default): every job done (exit 0)" 0 "$S" batch -q --url "http://127.0.0.1:$PORT/w/{}" \
  --db "$T/bw.db" --breaker 3 --breaker-open 300ms --retries 8 --base 50ms \
  --concurrency 2 "$T/k20.txt"
stop_server "$SRV_PID"
pyexport "wait (default): nothing deferred" "$T/bw.db" 'all(r["state"] == "done" for r in rows) and len(rows) == 20'
check "wait (default): the open breaker spared the server" [ "$(grep -c '"status":503' "$T/bwait.log")" -lt 20 ]

# The retry budget (no breaker): a 1 s outage spends it at once. defer: the
# refused retries are deferred. wait (default): they wait, one retry at a
# time goes through the outage, and every job is done.
seq -f "b%02g" 1 40 >"$T/k40b.txt"
start_server bdefer --outage 0s+1s --retry-after none
expect_exit "spent budget, --on-breaker defer: exit 3" 3 "$S" batch -q --url "http://127.0.0.1:$PORT/b/{}" \
  --db "$T/bd.db" --breaker 0 --on-breaker defer --retries 20 --base 50ms --cap 200ms \
  --concurrency 10 "$T/k40b.txt"
stop_server "$SRV_PID"
pyexport "spent budget, defer: jobs deferred as budget_exhausted" "$T/bd.db" \
  'sum(r["state"] == "deferred" and r["reason"] == "budget_exhausted" for r in rows) >= 20'
start_server bbudget --outage 0s+1s --retry-after none
expect_exit "spent budget, wait: every job done (exit 0)" 0 "$S" batch -q --url "http://127.0.0.1:$PORT/b/{}" \
  --db "$T/bb.db" --breaker 0 --retries 20 --base 50ms --cap 200ms \
  --concurrency 10 "$T/k40b.txt"
stop_server "$SRV_PID"
pyexport "spent budget, wait: nothing deferred" "$T/bb.db" 'all(r["state"] == "done" for r in rows) and len(rows) == 40'
n503=$(grep -c '"status":503' "$T/bbudget.log")
check "spent budget, wait: one retry at a time, not 40 ($n503 503s)" [ "$n503" -lt 80 ]

# A host that does not come back: waiting jobs still end at their deadline,
# at once when the breaker's next probe is past it (no useless sleep).
start_server bdead --outage 0s+60s --retry-after none
t0=$(date +%s%N)
expect_exit "dead host, wait: exit 3 at the deadline" 3 "$S" batch -q --url "http://127.0.0.1:$PORT/d/{}" \
  --db "$T/bdead.db" --breaker 3 --deadline 1s --base 50ms --concurrency 2 "$T/k20.txt"
took=$(( ($(date +%s%N) - t0) / 1000000 ))
stop_server "$SRV_PID"
check "dead host, wait: ended by the 1 s deadline, not after 60 s ($took ms)" [ "$took" -lt 5000 ]
pyexport "dead host, wait: every job deferred, by the deadline" "$T/bdead.db" \
  'len(rows) == 20 and all(r["state"] == "deferred" for r in rows) and sum(r["reason"] == "deadline" for r in rows) >= 15'

# An outage that says when it ends (503 + Retry-After: the rest of it): the
# open breaker probes when the server said, not after its own 30 s.
start_server bra --outage 0s+1s
t0=$(date +%s%N)
expect_exit "--on-breaker wait with Retry-After: every job done (exit 0)" 0 "$S" batch -q \
  --url "http://127.0.0.1:$PORT/r/{}" --db "$T/bra.db" --breaker 3 --on-breaker wait \
  --retries 8 --concurrency 2 "$T/k20.txt"
took=$(( ($(date +%s%N) - t0) / 1000000 ))
stop_server "$SRV_PID"
check "the breaker half-opened when the server said, not after 30 s ($took ms)" [ "$took" -lt 10000 ]

# ---- 10. --max-rate caps the adaptive rate ----------------------------------------
# The server allows 100/s (burst 5) so the adaptive rate turns on; capped at
# 20/s, 60 jobs cannot take less than (60 - a few) / 20 s.
start_server maxrate --rate 100 --burst 5
t0=$(date +%s%N)
expect_exit "--max-rate: exit 0" 0 "$S" batch -q --url "http://127.0.0.1:$PORT/m/{}" --db "$T/m.db" \
  --max-rate 20 --concurrency 10 "$T/k60.txt"
took=$(( ($(date +%s%N) - t0) / 1000000 ))
stop_server "$SRV_PID"
check "--max-rate 20: 60 jobs took at least 2 s ($took ms)" [ "$took" -ge 2000 ]

# ---- 11. the progress bar on a terminal --------------------------------------------
start_server tty
if script -qec "true" /dev/null >/dev/null 2>&1; then
  script -qec "$S batch --url http://127.0.0.1:$PORT/t/{} --db $T/tty.db --rate 50 $T/k20.txt" \
    "$T/tty.txt" >/dev/null 2>&1 || true
  check "tty: counts, ETA and jobs/s" grep -q '[0-9]*/20  ETA [0-9ms?]* *[0-9.]* jobs/s  done' "$T/tty.txt"
  check "tty: the 429 share" grep -q 'failed  *[0-9]*  429 *[0-9.]*%' "$T/tty.txt"
  check "tty: redrawn in place" grep -q "$(printf '\r')" "$T/tty.txt"
else
  echo "note: no working script(1); the TTY bar was not checked" >&2
fi
stop_server "$SRV_PID"

finish
