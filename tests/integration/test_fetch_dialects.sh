#!/usr/bin/env bash
# stagger fetch keeps the quotas a server announces, as batch does (issue
# 15): against `stagger serve --dialect x` (X: 429 without Retry-After, the
# spent window's reset as an epoch), a fetch whose first send is refused
# retries only once the window has turned, even with --retry-after ignore
# (the backoff alone would retry at once): the server counts 0 early
# retries and one refusal. A spent quota whose reset is beyond
# --max-server-wait gives the 429 back at once, as a long Retry-After does,
# and --no-quotas turns the limiter off (then the early retries show).
# GitHub's secondary limit (a 403 whose JSON body says so, no Retry-After,
# remaining > 0) is a throttle of at least 60 s, not an auth failure: over
# --max-server-wait the 403 comes back as SERVER_WAIT_TOO_LONG, unretried.
# Only 127.0.0.1 is contacted.
. "$(dirname "$0")/serve_test_lib.sh"

# spend N: N requests of the test's client (the server keys it by address).
spend() { for _ in $(seq "$1"); do curl -s -o /dev/null "$URL/spend"; done; }

# stats: the early retries and the refusals the server counted, "EARLY REFUSED".
stats() {
    "$PYTHON" - "$1" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
print(st["early_retries"]["total"], sum(q["refused"] for q in st["dialect"]["quotas"]))
PY
}

# --- a retry holds for the spent window (2 per 2 s) -----------------------------
# The window may turn between the spending and the fetch (its first send is
# then admitted and nothing is tested): the case is run again, at most 3 times.
tested=""
for try in 1 2 3; do
    serve_start x$try --dialect x --quota requests=2/2s --client-by-addr \
        --stats "$TMP/x$try.stats"
    spend 2
    rc=0
    "$STAGGER" fetch -s -o "$TMP/x.body" --retry-after ignore --retries 8 --base 50ms \
        --max-server-wait 10s "$URL/job" 2>"$TMP/x.err" || rc=$?
    serve_stop "$SRV_PID" TERM || fail "server exit"
    SRV_PID=""
    [ "$rc" -eq 0 ] || fail "fetch exited $rc: $(cat "$TMP/x.err")"
    read -r early refused < <(stats "$TMP/x$try.stats")
    if [ "$refused" -ge 1 ]; then
        [ "$early" -eq 0 ] || fail "fetch retried early: $early early retries"
        [ "$refused" -eq 1 ] || fail "fetch was refused $refused times (one is the first send's)"
        tested=1
        break
    fi
done
[ -n "$tested" ] || fail "the first send was never refused (the window turned 3 times)"
ok "fetch --retry-after ignore: the retry waits for the spent window's reset, 0 early, 1 refusal"

# --- --no-quotas: the backoff alone, and the server sees early retries -----------
serve_start xn --dialect x --quota requests=2/1h --client-by-addr --stats "$TMP/xn.stats"
spend 2
rc=0
"$STAGGER" fetch -s -o /dev/null --no-quotas --retry-after ignore --retries 2 --base 10ms \
    "$URL/job" 2>/dev/null || rc=$?
serve_stop "$SRV_PID" TERM || fail "server exit"
SRV_PID=""
[ "$rc" -ne 0 ] || fail "fetch --no-quotas got through a spent hour"
read -r early refused < <(stats "$TMP/xn.stats")
[ "$early" -ge 1 ] || fail "--no-quotas: no early retry counted ($early): the test shows nothing"
ok "fetch --no-quotas: the backoff alone retries early ($early early retries)"

# --- a reset beyond --max-server-wait: the 429 comes back at once ---------------
# The hour window of each client (X-Client-Id) is spent; honor (stg_decide
# on the hint) and ignore (the quota limiter) give the same answer back,
# after one send each.
serve_start xw --dialect x --quota requests=2/1h --stats "$TMP/xw.stats"
for mode in honor ignore; do
    for _ in 1 2; do curl -s -o /dev/null -H "X-Client-Id: $mode" "$URL/spend"; done
    rc=0
    "$STAGGER" fetch -s -o "$TMP/w.$mode" -w '%{http_code}\n' --retry-after $mode --retries 5 \
        --max-server-wait 2s -H "X-Client-Id: $mode" "$URL/job" >"$TMP/w.$mode.code" \
        2>/dev/null || rc=$?
    echo "$rc" >"$TMP/w.$mode.rc"
    [ "$(cat "$TMP/w.$mode.code")" = 429 ] || fail "$mode: status $(cat "$TMP/w.$mode.code"), not 429"
done
[ "$(cat "$TMP/w.honor.rc")" = "$(cat "$TMP/w.ignore.rc")" ] ||
    fail "exit $(cat "$TMP/w.ignore.rc") with ignore, $(cat "$TMP/w.honor.rc") with honor"
[ "$(cat "$TMP/w.honor.rc")" -ne 0 ] || fail "a 429 given back exited 0"
"$PYTHON" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a.keys()!=b.keys())' \
    "$TMP/w.honor" "$TMP/w.ignore" || fail "the answers given back differ"
serve_stop "$SRV_PID" TERM || fail "server exit"
SRV_PID=""
read -r early refused < <(stats "$TMP/xw.stats")
[ "$early" -eq 0 ] || fail "max-server-wait: $early early retries"
[ "$refused" -eq 2 ] || fail "max-server-wait: $refused refusals, not one per fetch"
ok "a spent quota beyond --max-server-wait gives the 429 back at once (exit $(cat "$TMP/w.honor.rc"))"

# --- GitHub's secondary limit, read from the 403's body ---------------------------
serve_start gh --dialect github --quota secondary=1/1h --client-by-addr --stats "$TMP/gh.stats"
curl -s -o /dev/null "$URL/repos/a/b"
rc=0
"$STAGGER" fetch -s -o "$TMP/gh.body" --max-server-wait 2s --retries 5 --log "$TMP/gh.log" \
    "$URL/repos/a/b" 2>/dev/null || rc=$?
serve_stop "$SRV_PID" TERM || fail "server exit"
SRV_PID=""
[ "$rc" -ne 0 ] || fail "a secondary limit's 403 exited 0"
grep -q "secondary rate limit" "$TMP/gh.body" || fail "the 403's body was not given back"
"$PYTHON" - "$TMP/gh.log" "$TMP/gh.stats" <<'PY' || fail "see above"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
st = json.load(open(sys.argv[2]))
end = [e for e in ev if e["event"] in ("give_up", "success")]
assert len(end) == 1 and end[0]["event"] == "give_up", end
assert end[0]["reason"] == "server_wait_too_long", end[0]
assert end[0]["retry_after_ms"] == 60000, end[0]
assert sum(1 for e in ev if e["event"] == "attempt_start") == 1, "retried"
assert st["early_retries"]["total"] == 0, st["early_retries"]
PY
ok "a GitHub secondary limit (403 body) is a 60 s wait: over --max-server-wait, given back unretried"
