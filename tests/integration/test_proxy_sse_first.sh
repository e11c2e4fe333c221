#!/usr/bin/env bash
# stagger proxy and an event stream that fails before it begins: an LLM API
# overloaded after it accepted a stream answers 200 and then an error event
# (Anthropic's `event: error` overloaded_error; OpenAI's `data: {"error":
# ...}`) as the first event. Nothing of the answer has reached the program,
# so the proxy takes that event as the refusal it stands for (529, 429) and
# retries it invisibly: the program, posting without an Idempotency-Key as
# the official SDKs do, gets one whole stream and a 200, and the upstream
# saw exactly the failed requests plus one. An error after the first event
# is the program's (its stream began: never retried, one request); a
# stream whose every first event fails is given back as the status it
# stands for with the error as a JSON body; a keep-alive comment before the
# first event is held with it. All on 127.0.0.1; no assertion on time.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch pxsse
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

: > "$T/up.log"
py_upstream sse_upstream.py "$T/up.log"
proxy_start s --upstream "$UP" --log "$T/px.log"

post() { # post PATH OUTFILE: the status; headers in OUTFILE.h
  curl -s -N -o "$2" -D "$2.h" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -H 'x-api-key: sk-ant-secret' --data '{"model":"m","stream":true}' "$PX$1"
}
sent() { grep -c "^$1 " "$T/up.log" || true; }

# ---- Anthropic overloaded twice at the first event, then a whole stream -----------
st=$(post "/over?k=2" "$T/over")
check "overloaded first events retried: the program gets 200 (got $st)" [ "$st" = 200 ]
check "the program's stream is the good one, whole" \
  [ "$(grep -c '^event: ' "$T/over")" = 5 ]
check "... ending in message_stop" grep -q '"message_stop"' "$T/over"
check "... and no error event reached it" [ "$(grep -c 'overloaded_error' "$T/over")" = 0 ]
check "the upstream saw the two refused requests and one more ($(sent /over))" \
  [ "$(sent /over)" = 3 ]
check "the answer's own fields reach the program" grep -qi '^X-Upstream-Header: kept' "$T/over.h"
check "the proxy logged the first event as a 529" \
  grep -q '"status":529' "$T/px.log"
check "... with its error type" grep -q '"stream_error":"overloaded_error"' "$T/px.log"
check "the API key never reaches the log" [ "$(grep -c 'sk-ant-secret' "$T/px.log")" = 0 ]

# ---- OpenAI-style error chunk, then a whole stream ----------------------------------
st=$(post "/oai?k=1" "$T/oai")
check "OpenAI error chunk retried: 200 (got $st)" [ "$st" = 200 ]
check "... the stream whole, ending in [DONE]" grep -q '^data: \[DONE\]' "$T/oai"
check "... no error in it" [ "$(grep -c 'rate_limit_exceeded' "$T/oai")" = 0 ]
check "the upstream saw 2 ($(sent /oai))" [ "$(sent /oai)" = 2 ]

# ---- an error after the first event is the program's -------------------------------
st=$(post "/mid" "$T/mid")
check "a stream that began: 200 as it came (got $st)" [ "$st" = 200 ]
check "... its first event and the error both reach the program" \
  [ "$(grep -c '^event: ' "$T/mid")" = 2 ]
check "... never retried: one request ($(sent /mid))" [ "$(sent /mid)" = 1 ]

# ---- every first event fails: given back as the status it stands for ----------------
st=$(curl -s -o "$T/alw" -D "$T/alw.h" -w '%{http_code}' -X POST -H 'Stagger-Retries: 1' \
  --data '{"stream":true}' "$PX/always")
check "always overloaded, one retry: the program gets 529 (got $st)" [ "$st" = 529 ]
check "... two requests sent ($(sent /always))" [ "$(sent /always)" = 2 ]
check "... the error as a JSON body" \
  $PY -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j["error"]["type"] != "overloaded_error")' "$T/alw"
check "... labelled JSON" grep -qi '^Content-Type: application/json' "$T/alw.h"

# ---- a comment before the first event is held with it ------------------------------
st=$(post "/slowfirst" "$T/slow")
check "keep-alive comment, then a stream: 200 (got $st)" [ "$st" = 200 ]
check "... the comment and every event arrive" \
  [ "$(grep -c '^: keep-alive' "$T/slow")" = 1 ] && [ "$(grep -c '^event: ' "$T/slow")" = 5 ]

proxy_stop
finish
