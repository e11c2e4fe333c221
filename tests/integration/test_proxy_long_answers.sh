#!/usr/bin/env bash
# stagger proxy with its defaults, issue #31's proof for long answers: a
# 3-minute Server-Sent Events stream (an event every 3 s) and a completion
# that answers after 90 s (its head and body together, as a non-streamed
# LLM answer comes) pass through one proxy at the same time, whole: both
# 200, the stream's every event in order and its [DONE], the completion's
# JSON intact, each sent once upstream. Before issue #31 every attempt had
# a fixed 10 s: the completion got a 504 and the stream was cut.
# The assertions are on statuses, bytes and counts, never on the pace (the
# test mostly sleeps): it is in STG_UNTIMED_TESTS. About 3 minutes.
. "$(dirname "$0")/lib.sh"
scratch pxl
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

py_upstream test_llm_upstream.py
count() { curl -s "$UP/count?key=$1"; }

proxy_start l --upstream "$UP" --log "$T/l.log"
# One answer first: until a host has answered once, the quota limiter
# sends its requests one at a time (quota.h, cold start), and a stream
# counts as answered only when it ends, so without this the two would run
# one after the other (270 s) instead of together.
check "a first answer from the host" [ "$(curl -s "$PX/count?key=warm")" = 0 ]

curl -s -N -o "$T/sse" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data '{"stream":true}' "$PX/sse?key=stream&secs=180&every=3" > "$T/sse.code" 2>"$T/sse.err" &
SSE=$!
curl -s -o "$T/slow" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data '{"stream":false}' "$PX/slow?key=slow&after=90" > "$T/slow.code" 2>"$T/slow.err" &
SLOW=$!
rc_slow=0; wait "$SLOW" || rc_slow=$?
rc_sse=0; wait "$SSE" || rc_sse=$?

check "the 90 s completion: curl exit 0 (got $rc_slow)" [ "$rc_slow" = 0 ]
check "  status 200 (got $(cat "$T/slow.code"))" [ "$(cat "$T/slow.code")" = 200 ]
jcheck "  its JSON whole" "$(cat "$T/slow")" 'j == {"done": True, "after": 90.0}'
check "  sent once (got $(count slow))" [ "$(count slow)" = 1 ]

check "the 3-minute stream: curl exit 0 (got $rc_sse)" [ "$rc_sse" = 0 ]
check "  status 200 (got $(cat "$T/sse.code"))" [ "$(cat "$T/sse.code")" = 200 ]
n=$(grep -c '^data: {"i":' "$T/sse" || true)
# 180 s at one event every 3 s: event 0 at once, then one per 3 s, so at
# least 61 events; the upstream numbers them, so a gap shows.
check "  every event ($n, at least 61)" [ "$n" -ge 61 ]
check "  numbered 0..$((n - 1)) in order, none missing" \
  $PY -c 'import re,sys; ids=[int(x) for x in re.findall(r"\"i\":(\d+)", open(sys.argv[1]).read())]; sys.exit(ids != list(range(len(ids))))' "$T/sse"
check "  each event whole" [ "$(grep -c '^data: {"i":[0-9]*,"pad":"x\{64\}"}$' "$T/sse")" = "$n" ]
check "  ends with [DONE]" [ "$(tail -n 2 "$T/sse" | head -n 1)" = "data: [DONE]" ]
check "  sent once (got $(count stream))" [ "$(count stream)" = 1 ]
check "no attempt timed out" sh -c "! grep -q '\"error\":\"timeout\"' '$T/l.log'"
# They ran together: the completion went out before the stream ended (an
# order in the log, not a time).
check "both were on the wire at once" $PY -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
i = next(n for n, e in enumerate(ev) if e.get("event") == "attempt_start" and "/slow" in e.get("url", ""))
j = next(n for n, e in enumerate(ev) if e.get("event") == "attempt_end" and "/sse" in e.get("url", ""))
sys.exit(0 if i < j else 1)' "$T/l.log"
proxy_stop
finish
