#!/usr/bin/env bash
# stagger proxy, refusals (issue #31 item 1): a POST without an
# Idempotency-Key (what the OpenAI and Anthropic SDKs send) that meets a 429
# or a 529 overloaded_error is retried, and the program gets the 200; with
# --no-retry-refusals it gets the 429 after one attempt; x-should-retry:
# false still gives the 429 back; a 503 to a POST without a key keeps the
# old rule (given back after one attempt). The upstream counts what it
# received, so every assertion is on requests and statuses, not on time.
# All on 127.0.0.1; every wait is a hang guard that ends at the event.
. "$(dirname "$0")/lib.sh"
scratch pxr
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

py_upstream test_llm_upstream.py
count() { curl -s "$UP/count?key=$1"; }
# post PATH: the status and body the program gets for a keyless JSON POST.
post() {
  curl -s -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data '{"model":"m","messages":[{"role":"user","content":"hi"}]}' "$PX$1"
}

# Small backoff bases: the waits are not what is tested here.
proxy_start d --upstream "$UP" --rate 0 --base 20ms --throttle-base 50ms --log "$T/d.log"

code=$(post "/refuse?key=a&code=429&n=2&retry_after=0")
check "429 twice, then 200: the program gets the 200 (got $code)" [ "$code" = 200 ]
check "  the upstream saw 3 POSTs (got $(count a))" [ "$(count a)" = 3 ]
check "  the body is the 200's" grep -q '"seen": 3' "$T/body"

code=$(post "/refuse?key=b&code=529&n=2")
check "529 overloaded_error twice, then 200: the program gets the 200 (got $code)" [ "$code" = 200 ]
check "  the upstream saw 3 POSTs (got $(count b))" [ "$(count b)" = 3 ]

code=$(post "/refuse?key=c&code=429&n=1&should_retry=false")
check "x-should-retry: false still gives the 429 back (got $code)" [ "$code" = 429 ]
check "  after one POST (got $(count c))" [ "$(count c)" = 1 ]

code=$(post "/refuse?key=e&code=503&n=1&retry_after=0")
check "a 503 to a keyless POST is given back (got $code)" [ "$code" = 503 ]
check "  after one POST (got $(count e))" [ "$(count e)" = 1 ]
proxy_stop
check "the log names the give-up of the 503" grep -q '"method_not_idempotent"' "$T/d.log"

# ---- off: refusals retried by method only ---------------------------------------------
proxy_start n --upstream "$UP" --rate 0 --base 20ms --throttle-base 50ms --no-retry-refusals
code=$(post "/refuse?key=f&code=429&n=1&retry_after=0")
check "--no-retry-refusals: the program gets the 429 (got $code)" [ "$code" = 429 ]
check "  after one POST (got $(count f))" [ "$(count f)" = 1 ]
check "  with the upstream's body" grep -q 'rate_limit_exceeded' "$T/body"
code=$(post "/refuse?key=g&code=529&n=1")
check "--no-retry-refusals: the program gets the 529 (got $code)" [ "$code" = 529 ]
check "  after one POST (got $(count g))" [ "$(count g)" = 1 ]
# A GET is still retried: idempotent.
code=$(curl -s -o /dev/null -w '%{http_code}' "$PX/refuse?key=h&code=429&n=1&retry_after=0")
check "--no-retry-refusals: a GET is still retried (got $code)" [ "$code" = 200 ]
proxy_stop
finish
