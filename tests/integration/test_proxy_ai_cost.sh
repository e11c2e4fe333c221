#!/usr/bin/env bash
# stagger proxy in front of an OpenAI-like server that meters tokens per
# minute (ai_tpm_upstream.py: each request counted at its arrival as its
# prompt's characters / 4 plus max_tokens, a bucket refilling at
# limit/window, a request over it refused with 429 and not counted): 16
# chat completions of varied prompt and max_tokens, 6 at a time, through
# the proxy with the cost estimate on (the default), then with
# --no-cost-estimate. Asserted: every call succeeds with the estimate on;
# the upstream's admitted tokens stay within burst + rate * t, the
# protocol's bound, in both runs; Stagger-Cost reaches the engine and
# never the upstream, and a malformed one is a 400 naming it. The refusals
# at the upstream in each run are printed (figures for make bench, not
# assertions). The same against an Anthropic-like upstream (input and
# output tokens metered apart, RFC 3339 resets). On 127.0.0.1 only; every
# wait is a hang guard.
. "$(dirname "$0")/lib.sh"
scratch pxai
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)
LIMIT=3000
ALIMIT=2000  # Anthropic: input tokens
AOLIMIT=1500 # and output tokens
WINDOW=3
N=16
# The upstream's rule: sum (prompt + max_tokens, the default) or max (AI_RULE=max).
RULE=${AI_RULE:-sum}

# The bodies: prompts of 100..2000 characters, max_tokens 10..300 (each
# costs 35..800 tokens, 16 of them about twice the bucket).
$PY - "$T" "$N" <<'EOF'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    chars = 100 + (i * 1637) % 1900
    mt = 10 + (i * 271) % 290
    body = {"model": "gpt-x", "max_tokens": mt,
            "messages": [{"role": "system", "content": "s" * (chars // 10)},
                         {"role": "user", "content": "u" * (chars - chars // 10)}]}
    open("%s/b%d.json" % (d, i), "w").write(json.dumps(body))
    body = {"model": "claude-x", "max_tokens": mt, "system": "s" * (chars // 10),
            "messages": [{"role": "user", "content": "u" * (chars - chars // 10)}]}
    open("%s/a%d.json" % (d, i), "w").write(json.dumps(body))
EOF

# run NAME PROXY-ARGS...: the N calls through a fresh proxy and upstream;
# their statuses in $T/NAME.codes, the upstream's arrivals in $T/NAME.log.
# OpenAI's chat completions, or with DIALECT=anthropic Anthropic's messages
# against its two buckets (input and output tokens).
DIALECT=openai
run() {
  _name=$1; shift
  : > "$T/$_name.log"
  : > "$T/$_name.up"
  if [ "$DIALECT" = anthropic ]; then
    _up="--dialect anthropic --limit $ALIMIT --out-limit $AOLIMIT" _path=v1/messages _b=a
  else
    _up="--limit $LIMIT --rule $RULE" _path=v1/chat/completions _b=b
  fi
  # shellcheck disable=SC2086
  $PY "$HERE/ai_tpm_upstream.py" $_up --window $WINDOW --log "$T/$_name.log" \
    > "$T/$_name.up" 2> "$T/$_name.uperr" &
  UPPID=$!
  UPPORT=$(listen_port "$T/$_name.up" $UPPID)
  [ -n "$UPPORT" ] || { echo "upstream did not start: $(cat "$T/$_name.uperr")" >&2; exit 1; }
  proxy_start "$_name" --upstream "http://127.0.0.1:$UPPORT" --deadline 120s "$@"
  seq 0 $((N - 1)) | xargs -P 6 -I{} curl -s -o /dev/null -w '%{http_code}\n' \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: k{}' \
    --data-binary "@$T/$_b{}.json" "$PX/$_path" > "$T/$_name.codes"
  proxy_stop
  kill "$UPPID"
  wait "$UPPID" 2>/dev/null || true
}


figures() {
  _ok=$(grep -c ' ok ' "$T/$1.log" || true)
  _ref=$(grep -c ' refused ' "$T/$1.log" || true)
  _good=$(grep -c '^200$' "$T/$1.codes" || true)
  echo "$1: $_good/$N calls 200, upstream admitted $_ok, refused $_ref ($((100 * _ref / (_ok + _ref)))% of arrivals)"
}

run est
run off --no-cost-estimate
DIALECT=anthropic
run aest
run aoff --no-cost-estimate
for n in est off aest aoff; do figures $n; done
check "estimate on: every call succeeds ($(sort "$T/est.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(grep -c '^200$' "$T/est.codes")" = "$N" ]
check "estimate on: admitted tokens within burst + rate*t" bound est
check "estimate off: admitted tokens within burst + rate*t" bound off
check "Anthropic, estimate on: every call succeeds ($(sort "$T/aest.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(grep -c '^200$' "$T/aest.codes")" = "$N" ]
# Input plus output tokens: within the two buckets' bounds together.
check "Anthropic: admitted tokens within burst + rate*t" bound aest $((ALIMIT + AOLIMIT))
check "Anthropic, estimate off: within burst + rate*t" bound aoff $((ALIMIT + AOLIMIT))
check "no Stagger-* field reached the upstream" \
  sh -c "! grep -q stagger-header '$T/est.log' '$T/off.log' '$T/aest.log' '$T/aoff.log'"

# ---- Stagger-Cost ------------------------------------------------------------
: > "$T/sc.log"
$PY "$HERE/ai_tpm_upstream.py" --limit $LIMIT --window $WINDOW --log "$T/sc.log" \
  > "$T/sc.up" 2> "$T/sc.uperr" &
UPPID=$!
UPPORT=$(listen_port "$T/sc.up" $UPPID)
proxy_start sc --upstream "http://127.0.0.1:$UPPORT"
code=$(curl -s -o "$T/sc.body" -w '%{http_code}' -H 'Stagger-Cost: tokens=abc' \
  --data-binary "@$T/b0.json" "$PX/v1/chat/completions")
check "a malformed Stagger-Cost is a 400 (got $code)" [ "$code" = 400 ]
check "the 400 names Stagger-Cost" grep -q 'Stagger-Cost' "$T/sc.body"
# A stated cost over the bucket's limit is never sent (the server announced
# it after the first answer): the proxy answers without an upstream try.
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary "@$T/b0.json" \
  "$PX/v1/chat/completions")
check "a first call passes (got $code)" [ "$code" = 200 ]
before=$(grep -c . "$T/sc.log")
code=$(curl -s -o "$T/sc.body2" -w '%{http_code}' -H "Stagger-Cost: tokens=$((LIMIT + 1))" \
  --data-binary "@$T/b0.json" "$PX/v1/chat/completions")
after=$(grep -c . "$T/sc.log")
check "a stated cost over the quota's limit is not sent ($before -> $after arrivals)" \
  [ "$before" = "$after" ]
check "... and answered 502 with the reason (got $code)" \
  sh -c "[ '$code' = 502 ] && grep -q 'over a quota' '$T/sc.body2'"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Stagger-Cost: tokens=5, requests=1' \
  --data-binary "@$T/b0.json" "$PX/v1/chat/completions")
check "a stated cost is sent, without its header (got $code)" [ "$code" = 200 ]
check "Stagger-Cost never reached the upstream" sh -c "! grep -q stagger-header '$T/sc.log'"
proxy_stop
finish
