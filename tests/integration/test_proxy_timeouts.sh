#!/usr/bin/env bash
# stagger proxy, per-attempt times (issue #31 item 0), short: the
# first-byte time ends an upstream that never answers (a GET is retried,
# then 504; a keyless POST is not retried: it had left); the idle time ends
# a stream that stalls after its head (the program keeps what it got, the
# connection is cut, no retry since bytes went out); a body that keeps
# flowing is not cut by the idle time however long it runs, while
# --max-time still bounds a whole attempt; Stagger-Timeout sets the times
# per request (stripped before the upstream; a bad value is a 400).
# Assertions are on statuses, bytes and counts; the times only make the
# test short (1 s limits, answers of a few seconds).
. "$(dirname "$0")/lib.sh"
scratch pxt
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

py_upstream test_llm_upstream.py
count() { curl -s "$UP/count?key=$1"; }

# ---- the proxy's own times ----------------------------------------------------------
proxy_start a --upstream "$UP" --rate 0 --base 20ms --retries 1 \
  --first-byte-timeout 1s --idle-timeout 1s --log "$T/a.log"

code=$(curl -s -o "$T/b1" -w '%{http_code}' "$PX/hang?key=h1")
check "no first byte: 504 (got $code)" [ "$code" = 504 ]
check "  a GET is retried: 2 attempts (got $(count h1))" [ "$(count h1)" = 2 ]
check "  the answer names the first-byte timeout" grep -q 'first-byte timeout' "$T/b1"

code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data '{}' "$PX/hang?key=h2")
check "no first byte to a keyless POST: 504 (got $code)" [ "$code" = 504 ]
check "  not retried, it had left (got $(count h2))" [ "$(count h2)" = 1 ]

set +e
curl -s -N -o "$T/stall" "$PX/stall?key=s1&events=2"
rc=$?
set -e
check "a stream that stalls is cut (curl exit $rc)" [ "$rc" != 0 ]
check "  the program got its head and both events" \
  [ "$(grep -c '^data: {"i":' "$T/stall")" = 2 ]
check "  no retry once bytes went out (got $(count s1))" [ "$(count s1)" = 1 ]
check "  the log says it was a timeout" \
  grep -q '"event":"give_up".*stall.*"error":"timeout"' "$T/a.log"

# A body flowing for 3 s with a 1 s idle time: never idle, never cut.
set +e
curl -s -N -o "$T/flow" "$PX/sse?key=f1&secs=3&every=0.25"
rc=$?
set -e
check "a flowing stream longer than the idle time arrives whole (curl exit $rc)" [ "$rc" = 0 ]
check "  ends with [DONE]" grep -q '^data: \[DONE\]' "$T/flow"
n=$(grep -c '^data: {"i":' "$T/flow")
check "  every event, numbered without a gap ($n)" \
  [ "$(grep -o '"i":[0-9]*' "$T/flow" | tail -1)" = "\"i\":$((n - 1))" ]
proxy_stop

# ---- --max-time still bounds a whole attempt ------------------------------------------
proxy_start m --upstream "$UP" --rate 0 --retries 0 --max-time 1s
set +e
curl -s -N -o "$T/cut" "$PX/sse?key=m1&secs=4&every=0.25"
rc=$?
set -e
check "--max-time 1s cuts a 4 s stream (curl exit $rc)" [ "$rc" != 0 ]
check "  no [DONE]" sh -c "! grep -q DONE '$T/cut'"
proxy_stop

# ---- Stagger-Timeout per request ----------------------------------------------------
proxy_start s --upstream "$UP" --rate 0 --base 20ms --log "$T/s.log"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Stagger-Timeout: first-byte=1s' \
  -H 'Stagger-Retries: 0' "$PX/hang?key=t1")
check "Stagger-Timeout: first-byte=1s ends a hung upstream: 504 (got $code)" [ "$code" = 504 ]
check "  one attempt (Stagger-Retries: 0) (got $(count t1))" [ "$(count t1)" = 1 ]
set +e
curl -s -N -o "$T/stall2" -H 'Stagger-Timeout: 1s' "$PX/stall?key=t2&events=1"
rc=$?
set -e
check "Stagger-Timeout: 1s (the longest silence) cuts a stalled stream (curl exit $rc)" [ "$rc" != 0 ]
check "  after its event" grep -q '^data: {"i":0}' "$T/stall2"
code=$(curl -s -o "$T/bad" -w '%{http_code}' -H 'Stagger-Timeout: idle=soon' "$PX/sse?key=t3&secs=0")
check "a bad Stagger-Timeout is a 400 (got $code)" [ "$code" = 400 ]
check "  naming the header" grep -q 'Stagger-Timeout' "$T/bad"
check "  nothing sent (got $(count t3))" [ "$(count t3)" = 0 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Stagger-Timeout: idle=1s,idle=2s' "$PX/sse?key=t4&secs=0")
check "a time named twice is a 400 (got $code)" [ "$code" = 400 ]
proxy_stop
finish
