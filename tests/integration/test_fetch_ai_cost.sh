#!/usr/bin/env bash
# stagger fetch of a chat completion against an OpenAI-like server that
# meters tokens per minute (ai_tpm_upstream.py) and says no retry-after:
# its bucket (2200 tokens, refilled in 6 s) starts with 200, the request
# is estimated at 1000 tokens (2000 prompt characters / 4 + 500
# max_tokens), so the first arrival is refused with the remaining count and
# the time until full. With the estimate, the retry waits until the
# announced refill holds the 1000 tokens: one refusal, then the answer
# (the wait comes from the server's own count and rate, a lower bound on
# when it has them). Without it (--no-cost-estimate) the retries go at the
# policy's backoff: the refusals are printed, not asserted. On 127.0.0.1.
. "$(dirname "$0")/lib.sh"
scratch ftai
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)

$PY -c 'import json; print(json.dumps({"model": "m", "max_tokens": 500,
  "messages": [{"role": "user", "content": "u" * 2000}]}))' > "$T/body.json"

# run NAME ARGS...: one fetch against a fresh upstream; its exit status in
# $T/NAME.rc, the upstream's arrivals in $T/NAME.log.
run() {
  _n=$1; shift
  : > "$T/$_n.log"
  : > "$T/$_n.up"
  $PY "$HERE/ai_tpm_upstream.py" --limit 2200 --window 6 --start 200 --no-retry-after \
    --log "$T/$_n.log" > "$T/$_n.up" 2> "$T/$_n.uperr" &
  _pid=$!
  _p=$(listen_port "$T/$_n.up" $_pid)
  [ -n "$_p" ] || { echo "upstream did not start: $(cat "$T/$_n.uperr")" >&2; exit 1; }
  _rc=0
  "$STAGGER" fetch -s -o "$T/$_n.body" --idempotency-key auto -H 'Content-Type: application/json' \
    -d "@$T/body.json" "$@" "http://127.0.0.1:$_p/v1/chat/completions" 2> "$T/$_n.err" || _rc=$?
  echo "$_rc" > "$T/$_n.rc"
  kill "$_pid"
  wait "$_pid" 2>/dev/null || true
}

run est
run off --no-cost-estimate
for n in est off; do
  echo "$n: fetch exit $(cat "$T/$n.rc"), upstream refused $(grep -c ' refused ' "$T/$n.log" || true), admitted $(grep -c ' ok ' "$T/$n.log" || true)"
done
check "estimate on: fetch succeeds (exit $(cat "$T/est.rc"): $(cat "$T/est.err"))" [ "$(cat "$T/est.rc")" = 0 ]
check "estimate on: the answer's body" grep -q '"usage"' "$T/est.body"
check "estimate on: one refusal, then the retry waits for the tokens ($(awk '{print $2}' "$T/est.log" | tr '\n' ' '))" \
  [ "$(awk '{print $2}' "$T/est.log" | tr '\n' ' ')" = "refused ok " ]
finish
