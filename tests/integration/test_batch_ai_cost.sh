#!/usr/bin/env bash
# stagger batch against an OpenAI-like server that meters tokens per minute
# (ai_tpm_upstream.py, as in test_proxy_ai_cost.sh): 16 chat completion
# jobs (JSONL, each with an idempotency_key so that a refusal is retried),
# with the cost estimate on (the default), then with --no-cost-estimate.
# Asserted: every job is done with the estimate on, and the upstream's
# admitted tokens stay within burst + rate * t in both runs (the
# protocol's bound). The refusals at the upstream are printed (figures for
# make bench, not assertions). On 127.0.0.1 only.
. "$(dirname "$0")/lib.sh"
scratch btai
. "$(dirname "$0")/proxy_lib.sh" # bound: the token bound on the upstream's log
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)
LIMIT=3000
WINDOW=3
N=16

# run NAME ARGS...: the N jobs against a fresh upstream; the batch's exit
# status in $T/NAME.rc, the upstream's arrivals in $T/NAME.log.
run() {
  _name=$1; shift
  : > "$T/$_name.log"
  : > "$T/$_name.up"
  $PY "$HERE/ai_tpm_upstream.py" --limit $LIMIT --window $WINDOW --log "$T/$_name.log" \
    > "$T/$_name.up" 2> "$T/$_name.uperr" &
  UPPID=$!
  UPPORT=$(listen_port "$T/$_name.up" $UPPID)
  [ -n "$UPPORT" ] || { echo "upstream did not start: $(cat "$T/$_name.uperr")" >&2; exit 1; }
  $PY - "$T/$_name.jsonl" "$N" "http://127.0.0.1:$UPPORT" <<'EOF'
import json, sys
path, n, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(path, "w") as f:
    for i in range(n):
        chars = 100 + (i * 1637) % 1900
        mt = 10 + (i * 271) % 290
        body = {"model": "gpt-x", "max_tokens": mt,
                "messages": [{"role": "user", "content": "u" * chars}]}
        f.write(json.dumps({"id": "j%d" % i, "method": "POST", "idempotency_key": "k%d" % i,
                            "url": base + "/v1/chat/completions", "body": body}) + "\n")
EOF
  _rc=0
  "$STAGGER" batch --db "$T/$_name.db" --deadline 120s "$@" "$T/$_name.jsonl" \
    > "$T/$_name.out" 2> "$T/$_name.err" || _rc=$?
  echo "$_rc" > "$T/$_name.rc"
  kill "$UPPID"
  wait "$UPPID" 2>/dev/null || true
}


run est
run off --no-cost-estimate
for n in est off; do
  _ok=$(grep -c ' ok ' "$T/$n.log" || true)
  _ref=$(grep -c ' refused ' "$T/$n.log" || true)
  echo "$n: batch exit $(cat "$T/$n.rc"), upstream admitted $_ok, refused $_ref ($((100 * _ref / (_ok + _ref)))% of arrivals)"
done
report=$("$STAGGER" batch report --db "$T/est.db" --json)
jcheck "estimate on: every job done" "$report" "j['states']['done'] == $N"
check "estimate on: batch exits 0 (got $(cat "$T/est.rc"))" [ "$(cat "$T/est.rc")" = 0 ]
check "estimate on: admitted tokens within burst + rate*t" bound est
check "estimate off: admitted tokens within burst + rate*t" bound off
finish
