# `stagger fetch` against `stagger serve` on 127.0.0.1: Retry-After (seconds
# and HTTP-date) honoured within [hint, hint + spread]; a server wait above
# the window handed back at once; POST retried only with an idempotency key;
# 404/401 never retried; resets and hangs retried; the deadline; exit codes;
# SIGINT; -o/-i; redaction of planted secrets in -v, the JSON log and the
# metrics. Only loopback traffic; every server is stopped on exit.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1; then
  skip "stagger fetch not built (no libcurl): skipped"
fi
T=$(mktemp -d /tmp/stg_fetch.XXXXXX)
SRV_PID=

stop_server() {
  if [ -n "$SRV_PID" ]; then
    kill "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
    SRV_PID=
  fi
}
cleanup() { in_script || return 0; stop_server; rm -rf "$T"; }
trap cleanup EXIT

# start_server ARGS...: sets PORT, BASE and SRV_LOG (complete after stop_server).
start_server() {
  stop_server
  SRV_LOG=$T/server.$RANDOM.log
  : > "$T/srv.out"
  "$S" serve --bind 127.0.0.1 --port 0 --threads 2 --log "$SRV_LOG" "$@" > "$T/srv.out" &
  SRV_PID=$!
  PORT=$(listen_port "$T/srv.out" "$SRV_PID")
  [ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }
  BASE=http://127.0.0.1:$PORT
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

lines_for() { grep -c "$1" "$SRV_LOG" || true; }
# evcheck NAME JSONL EVENT EXPR [CLIENT]: EXPR over j, the first event of
# type EVENT in the JSON log, and g, the arrival gaps (ms) of CLIENT's
# requests in the server log. One python run per check.
evcheck() {
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! python3 - "$2" "$3" "$4" "${5:-}" "${SRV_LOG:-}" <<'EOF'
import json, sys
path, event, expr, client, srv = sys.argv[1:6]
j = next((json.loads(l) for l in open(path) if json.loads(l)["event"] == event), None)
g = []
if client:
    t = [json.loads(l)["t_us"] for l in open(srv) if json.loads(l)["client"] == client]
    g = [(b - a) / 1000 for a, b in zip(t, t[1:])]
ok = j is not None and eval(expr)
if not ok:
    print("event:", j, "gaps:", g, file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
  then
    fail "$1: $4"
  fi
}

# ---- Retry-After in seconds: wait in [hint, hint + spread] ----------------
start_server --fail-first 1
expect_exit "retry-after seconds: success" 0 "$S" fetch -s -H 'X-Client-Id: ra-s' --base 100ms \
  --log-json "$T/ra.jsonl" -o "$T/ra.out" "$BASE/ra"
stop_server
# spread = max(0.2 * 1000 ms, base 100 ms) = 200 ms; 150 ms of slack at the server.
evcheck "retry-after seconds: parsed and honoured" "$T/ra.jsonl" wait \
  'j["retry_after_ms"] == 1000 and 1000 <= j["wait_ms"] <= 1200 and j["status"] == 429 and j["reason"] == "retry_status" and len(g) == 1 and 1000 <= g[0] <= j["wait_ms"] + 1000' ra-s
evcheck "retry-after seconds: 429 logged as quota" "$T/ra.jsonl" attempt_end \
  'j["status_class"] == "quota" and j["method"] == "GET"'

# ---- Retry-After as an HTTP-date ---------------------------------------------
start_server --fail-first 1 --retry-after date
expect_exit "retry-after date: success" 0 "$S" fetch -s -H 'X-Client-Id: ra-d' --base 100ms \
  --log-json "$T/rd.jsonl" -o /dev/null "$BASE/rd"
stop_server
# A whole-second date of now + 1 s: the hint is 1-2 s; the wait lies in
# [hint, hint + max(0.2 * hint, base)], and so does the server's gap (slack).
evcheck "retry-after date: parsed and honoured" "$T/rd.jsonl" wait \
  '900 <= j["retry_after_ms"] <= 2000 and j["retry_after_ms"] <= j["wait_ms"] <= j["retry_after_ms"] + max(0.2 * j["retry_after_ms"], 100) + 1 and len(g) == 1 and j["retry_after_ms"] - 5 <= g[0] <= j["wait_ms"] + 1000' ra-d

# ---- a server wait above the window: the 429 comes back at once --------------
start_server
t0=$(now_ms)
expect_exit "long server wait: exit 3" 3 "$S" fetch -s --max-server-wait 5s -o "$T/long.out" \
  "$BASE/status/429?retry_after=100"
took=$(( $(now_ms) - t0 ))
# Upper bounds on wall time below tell the behaviour from its failure (a
# 100 s hint, a hang, a 10 s attempt, a 20 s wait): the gap leaves a busy
# machine room to start an ASan binary; the lower bounds are the protocol.
check "long server wait: handed back at once ($took ms)" [ "$took" -lt 5000 ]
check "long server wait: -o has the 429 body" grep -q '"status":429' "$T/long.out"

# ---- 404 and 401 are never retried ---------------------------------------------
expect_exit "404: exit 1" 1 "$S" fetch -s -o /dev/null "$BASE/status/404"
expect_exit "401: exit 1" 1 "$S" fetch -s -o /dev/null "$BASE/status/401"

# ---- -o keeps a final 503, -i includes headers ---------------------------------
expect_exit "503 after retries: exit 3" 3 "$S" fetch -s --retries 1 --base 10ms -o "$T/503.out" \
  "$BASE/status/503"
check "-o has the final 503 body" grep -q '"status":503' "$T/503.out"
"$S" fetch -i "$BASE/fine" > "$T/inc.out"
check "-i: status line first" sh -c "head -1 '$T/inc.out' | grep -q '^HTTP/1.1 200'"
check "-i: body after headers" grep -q '"ok":true' "$T/inc.out"
stop_server
check "404 sent once" [ "$(lines_for '"/status/404"')" = 1 ]
check "401 sent once" [ "$(lines_for '"/status/401"')" = 1 ]
check "long wait: one request" [ "$(lines_for '"/status/429"')" = 1 ]
check "503: two attempts" [ "$(lines_for '"/status/503"')" = 2 ]

# ---- POST: retried only with an idempotency key, or after a refusal ---------------
start_server --fail-first 1
head -c 30000 /dev/zero | tr '\0' 'b' > "$T/body"
expect_exit "POST without key, refusals by method: not retried (exit 1)" 1 "$S" fetch -s \
  -H 'X-Client-Id: post-nokey' --no-retry-refusals -d 'a=1' -o /dev/null "$BASE/echo"
expect_exit "POST without key: a 429 is a refusal, retried" 0 "$S" fetch -s --base 50ms \
  -H 'X-Client-Id: post-refused' -d 'a=1' -o /dev/null "$BASE/echo"
expect_exit "POST with key auto: retried" 0 "$S" fetch -s -H 'X-Client-Id: post-key' --base 50ms \
  --idempotency-key auto --data-binary "@$T/body" -o "$T/post.out" "$BASE/echo"
expect_exit "PUT retried without key" 0 "$S" fetch -s -X PUT -H 'X-Client-Id: put' --base 50ms \
  -d 'x=1' -o "$T/put.out" "$BASE/echo"
stop_server
check "POST without key: one request" [ "$(lines_for '"client":"post-nokey"')" = 1 ]
check "POST without key, refused: two requests" [ "$(lines_for '"client":"post-refused"')" = 2 ]
check "POST with key: two requests" [ "$(lines_for '"client":"post-key"')" = 2 ]
key=$(sed -n 's/.*"Idempotency-Key":"\([^"]*\)".*/\1/p' "$T/post.out")
check "key auto is a UUIDv4 ($key)" sh -c "echo '$key' | grep -Eqx '[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}'"
check "same key on both attempts" [ "$(lines_for "\"key\":\"$key\"")" = 2 ]
check "retried POST carried the whole body" grep -q '"body_length":30000' "$T/post.out"
check "retried POST was a POST" grep -q '"method":"POST"' "$T/post.out"
check "retried PUT carried its body" grep -q '"method":"PUT".*"body":"x=1"' "$T/put.out"
check "PUT: two requests" [ "$(lines_for '"client":"put"')" = 2 ]

# ---- connection reset and hang are retried ------------------------------------------
start_server --reset-every 2
"$S" fetch -s -o /dev/null "$BASE/warm"                # request 1: fine
expect_exit "reset: retried" 0 "$S" fetch -v -o /dev/null --base 50ms "$BASE/reset"
check "reset: -v shows it" grep -q 'attempt 1: reset' /tmp/stg_err.$$
stop_server
check "reset: logged, then answered" [ "$(grep '"/reset"' "$SRV_LOG" | sed 's/.*"status":\([^,]*\),.*/\1/' | tr '\n' ' ')" = '"reset" 200 ' ]

start_server --hang-every 2
"$S" fetch -s -o /dev/null "$BASE/warm"
t0=$(now_ms)
expect_exit "hang: timed out and retried" 0 "$S" fetch -v -o /dev/null --base 50ms --max-time 300ms "$BASE/hang"
took=$(( $(now_ms) - t0 ))
check "hang: -v shows the timeout" grep -q 'attempt 1: timeout' /tmp/stg_err.$$
check "hang: took the attempt timeout ($took ms)" [ "$took" -ge 300 -a "$took" -lt 5000 ]
stop_server
check "hang: two requests" [ "$(lines_for '"/hang"')" = 2 ]

# As in curl, a bare --max-time is seconds (1 means 1 s, not 1 ms).
start_server --hang-every 1
t0=$(now_ms)
expect_exit "bare --max-time is seconds (exit 7)" 7 "$S" fetch -s -o /dev/null --retries 0 --max-time 1 "$BASE/x"
took=$(( $(now_ms) - t0 ))
check "bare --max-time 1 waited a second ($took ms)" [ "$took" -ge 900 -a "$took" -lt 5000 ]
stop_server

# ---- the deadline holds ---------------------------------------------------------------
start_server --hang-every 1
t0=$(now_ms)
expect_exit "deadline with hanging server: exit 8" 8 "$S" fetch -s --deadline 1s --max-time 10s "$BASE/x"
took=$(( $(now_ms) - t0 ))
check "deadline: ended at 1 s ($took ms)" [ "$took" -ge 900 -a "$took" -lt 5000 ]
stop_server
start_server
t0=$(now_ms)
expect_exit "deadline with 503s: exit 8" 8 "$S" fetch -s --deadline 1500ms --base 200ms --retries 100 \
  -o /dev/null "$BASE/status/503"
took=$(( $(now_ms) - t0 ))
check "deadline: 1.5 s held ($took ms)" [ "$took" -lt 5000 ]

# ---- SIGINT cancels a long wait: exit 130 -------------------------------------------------
# The client's own log says when it begins its wait (the server's log is
# complete only after stop_server).
"$S" fetch -s --max-server-wait 60s --log-json "$T/int.jsonl" -o /dev/null \
  "$BASE/status/503?retry_after=20" &
fp=$!
wait_grep "$T/int.jsonl" '"event":"wait"'
sleep 0.3
t0=$(now_ms)
kill -INT $fp
set +e; wait $fp; got=$?; set -e
took=$(( $(now_ms) - t0 ))
check "SIGINT: exit 130 (got $got)" [ "$got" = 130 ]
check "SIGINT: prompt ($took ms)" [ "$took" -lt 5000 ]

# ---- redaction: planted secrets never reach -v, the log or the metrics ------------------------
stop_server
start_server --fail-first 1
URL="http://someone:SECRETPW@127.0.0.1:$PORT/echo?token=SECRETQ&SECRETBARE&x=shown#SECRETF"
set +e
"$S" fetch -v -H 'X-Client-Id: redact' -H 'Authorization: Bearer SECRETAUTH' \
  -H 'Cookie: sid=SECRETCOOKIE' -H 'X-Api-Key: SECRETKEY' -H 'X-Custom: SECRETCUSTOM' \
  --secret-header X-Custom --base 20ms --log-json "$T/red.jsonl" --metrics "$T/red.prom" \
  -o "$T/red.out" "$URL" 2> "$T/red.err"
rc=$?
set -e
check "redaction run: exit 0 (got $rc)" [ "$rc" = 0 ]
check "the secrets were really sent" grep -q SECRETAUTH "$T/red.out"
check "the request was retried" grep -q '"event":"wait"' "$T/red.jsonl"
for f in red.err red.jsonl red.prom; do
  check "no planted secret in $f" sh -c "! grep -q SECRET '$T/$f'"
done
# one rule for query values (issue #37): a secret name's value hidden, the rest shown
check "-v shows the redacted URL" grep -q "/echo?token=REDACTED&REDACTED&x=shown" "$T/red.err"
check "-v shows a redacted Authorization" grep -q '> Authorization: REDACTED' "$T/red.err"
check "metrics: 429 counted as quota" grep -q 'stagger_attempts_total{class="quota"} 1' "$T/red.prom"
check "metrics: one success" grep -q '^stagger_successes_total 1' "$T/red.prom"
check "metrics: retry by cause 429" grep -q 'stagger_retries_total{reason="retry_status",cause="429"} 1' "$T/red.prom"
# A transport failure with secrets in the URL: the error message is redacted too.
stop_server
set +e
"$S" fetch -v --retries 1 --base 10ms --log-json "$T/red2.jsonl" "$URL" 2> "$T/red2.err"
rc=$?
set -e
check "refused: exit 7 (got $rc)" [ "$rc" = 7 ]
check "refused: no planted secret in -v/errors" sh -c "! grep -q SECRET '$T/red2.err' '$T/red2.jsonl'"
check "refused: classified" grep -q 'connect_refused' "$T/red2.err"

# ---- 503 is an outage in the log ------------------------------------------------------------
start_server
"$S" fetch -s --retries 0 --log-json "$T/o.jsonl" -o /dev/null "$BASE/status/503" || true
evcheck "503 logged as outage" "$T/o.jsonl" give_up \
  'j["status_class"] == "outage" and j["reason"] == "attempts_exhausted" and j["outcome"] == "give_up"'
stop_server

# ---- SIGTERM is handled as SIGINT: message, metrics written, exit 143 --------------
start_server
"$S" fetch --max-server-wait 60s --metrics "$T/term.prom" --log-json "$T/term.jsonl" \
  -o /dev/null "$BASE/status/503?retry_after=20" 2> "$T/term.err" &
fp=$!
wait_grep "$T/term.jsonl" '"event":"wait"'
sleep 0.3
t0=$(now_ms)
kill -TERM $fp
set +e; wait $fp; got=$?; set -e
took=$(( $(now_ms) - t0 ))
check "SIGTERM: exit 143 (got $got)" [ "$got" = 143 ]
check "SIGTERM: prompt ($took ms)" [ "$took" -lt 5000 ]
check "SIGTERM: a message says so" grep -q 'terminated' "$T/term.err"
check "SIGTERM: metrics written (one 503 attempt)" \
  grep -q 'stagger_attempts_total{class="outage"} 1' "$T/term.prom"

# ---- outputs: checked before the first request; bodies and logs 0600 ---------------
for opt in "--metrics $T/nodir/m.prom" "--log-json $T/nodir/l.jsonl" "-o $T/nodir/b.out"; do
  before=$(grep -c '"/unwritable"' "$SRV_LOG" || true)
  # shellcheck disable=SC2086
  expect_exit "unwritable $opt: exit 1" 1 "$S" fetch -s $opt "$BASE/unwritable"
  check "unwritable $opt: nothing sent" [ "$(grep -c '"/unwritable"' "$SRV_LOG" || true)" = "$before" ]
done
rm -f "$T/priv.out" "$T/priv.jsonl"
(umask 022; "$S" fetch -s -o "$T/priv.out" --log-json "$T/priv.jsonl" "$BASE/priv")
check "-o created 0600" [ "$(stat -c %a "$T/priv.out")" = 600 ]
check "--log-json created 0600" [ "$(stat -c %a "$T/priv.jsonl")" = 600 ]
check "-o holds the body" grep -q '"ok":true' "$T/priv.out"
expect_exit "-o, no answer: exit 7" 7 "$S" fetch -s --retries 0 -o "$T/none.out" http://127.0.0.1:1/x
check "-o, no answer: no file left" [ ! -e "$T/none.out" ]

# ---- --max-body: a longer body is an error with its own status --------------------
expect_exit "--max-body 8: exit 9" 9 "$S" fetch --max-body 8 -o "$T/cut.out" "$BASE/long-path-x"
check "--max-body: a message says it was cut" grep -q 'larger than 8 bytes' /tmp/stg_err.$$
check "--max-body: the first 8 bytes kept" [ "$(wc -c < "$T/cut.out")" = 8 ]
expect_exit "--max-body 8 on a 404: still 9 (not all there)" 9 "$S" fetch -s --max-body 8 \
  -o /dev/null "$BASE/status/404"
expect_exit "--max-body 1k: whole body, exit 0" 0 "$S" fetch -s --max-body 1k -o /dev/null "$BASE/x"
expect_exit "--max-body 0: usage" 2 "$S" fetch --max-body 0 "$BASE/x"

# ---- secrets without argv: -H @FILE and --secret-header-env -------------------------
printf 'Authorization: Bearer SECRETFILEAUTH\r\n\nX-From-File: SECRETFILECUSTOM\n' > "$T/hdrs"
set +e
SECRET_VAR='SECRETENVVALUE' "$S" fetch -v -H "@$T/hdrs" --secret-header-env X-Env-Token=SECRET_VAR \
  --secret-header-env X-Env-Other=SECRET_VAR -o "$T/hf.out" "$BASE/echo" 2> "$T/hf.err"
rc=$?
set -e
check "-H @FILE: exit 0 (got $rc)" [ "$rc" = 0 ]
check "-H @FILE: Authorization sent" grep -q 'Bearer SECRETFILEAUTH' "$T/hf.out"
check "-H @FILE: custom header sent" grep -q 'SECRETFILECUSTOM' "$T/hf.out"
check "--secret-header-env: sent" grep -q '"X-Env-Token":"SECRETENVVALUE"' "$T/hf.out"
check "-H @FILE, env: no value in -v" sh -c "! grep -q SECRET '$T/hf.err'"
check "-H @FILE: -v shows the name" grep -q '> X-From-File: REDACTED' "$T/hf.err"
expect_exit "-H @missing: usage" 2 "$S" fetch -H "@$T/missing" "$BASE/x"
printf 'Bad Name: SECRETBAD\n' > "$T/badhdrs"
expect_exit "-H @FILE with a bad line: usage" 2 "$S" fetch -H "@$T/badhdrs" "$BASE/x"
check "-H @FILE bad line: value not echoed" sh -c "! grep -q SECRET /tmp/stg_err.$$"
expect_exit "--secret-header-env, unset variable: usage" 2 env -u NOPE_UNSET "$S" fetch \
  --secret-header-env X-T=NOPE_UNSET "$BASE/x"
expect_exit "--secret-header-env NAME only: usage" 2 "$S" fetch --secret-header-env X-T "$BASE/x"
stop_server
check "bad header files and unset variables sent nothing" [ "$(lines_for '"/x"')" = 1 ]

# ---- bad usage: exit 2 with one line, never a crash ---------------------------------------------
for args in "" "--retries abc $BASE/x" "--bogus $BASE/x" "--burst 5 $BASE/x" "ftp://127.0.0.1/x" \
    "-d @$T/missing $BASE/x" "--deadline -1s $BASE/x" "--connect-timeout 0 $BASE/x" \
    "--rate 10/y $BASE/x" "-X BAD\\METHOD $BASE/x" "$BASE/a $BASE/b" "--idempotency-key" \
    "--base 2s --cap 1s $BASE/x" "-H Authorization;SECRETH $BASE/x" "-H NoColonSECRETH $BASE/x" \
    "http://u:SECRETU@127.0.0.1:1/a http://127.0.0.1:1/b" "http://[::1/SECRETV6" \
    "http://u:SECRETP@/nohost"; do
  # shellcheck disable=SC2086
  expect_exit "usage: '$args'" 2 "$S" fetch $args
  check "usage: '$args' prints one line" [ "$(wc -l < /tmp/stg_err.$$)" = 1 ]
  check "usage: '$args' echoes no secret" sh -c "! grep -q SECRET /tmp/stg_err.$$"
done
expect_exit "--help" 0 "$S" fetch --help
check "--help lists the exit codes" grep -q '130 interrupted' /tmp/stg_out.$$

finish
