#!/usr/bin/env bash
# Issue #31's proof for item 5, one quota for every replica: two `stagger
# proxy` replicas and one `stagger batch` worker, all with --limiter on one
# redis-server, send AI chat completions to one OpenAI-like upstream that
# meters tokens (ai_tpm_upstream.py: a request counted at its arrival as
# its prompt's characters / 4 plus max_tokens, a bucket of LIMIT refilling
# LIMIT per WINDOW seconds, x-ratelimit-*-tokens headers, 429 when over,
# every arrival logged). Asserted: every call of the three succeeds (200
# to the programs, every batch job done), the upstream's admitted tokens
# stay within burst + rate * t over every prefix of its log (the bucket
# starts full), no Stagger-* field reaches it, and the replicas held the
# quota in Redis (its ledger hash names each of them); and two proxies on
# an Anthropic-like upstream (input and output tokens metered apart): every
# call succeeds, the bound holds, both units are held in Redis. Printed, for make
# bench and not asserted: the share of arrivals the upstream refused with
# one replica, with the three sharing through Redis, and with two proxies
# each alone (no --limiter). On 127.0.0.1 only; every wait is a hang guard.
. "$(dirname "$0")/lib.sh"
scratch pxsq
. "$(dirname "$0")/proxy_lib.sh"
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "redis-server or redis-cli missing: skipped"; exit 77; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)
LIMIT=3000
WINDOW=3
N=${SQ_CALLS:-12} # calls per program (bench/bench_redis.sh: 24)

# The bodies: prompts of 100..1000 characters, max_tokens 10..150.
$PY - "$T" $((3 * N)) <<'EOF'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    chars = 100 + (i * 1637) % 900
    mt = 10 + (i * 271) % 140
    body = {"model": "gpt-x", "max_tokens": mt,
            "messages": [{"role": "system", "content": "s" * (chars // 10)},
                         {"role": "user", "content": "u" * (chars - chars // 10)}]}
    open("%s/b%d.json" % (d, i), "w").write(json.dumps(body))
    body = {"model": "claude-x", "max_tokens": mt, "system": "s" * (chars // 10),
            "messages": [{"role": "user", "content": "u" * (chars - chars // 10)}]}
    open("%s/a%d.json" % (d, i), "w").write(json.dumps(body))
EOF

. "$HERE/redis_lib.sh"
start_redis
LIM="redis://127.0.0.1:$RPORT"
db_q() { $PY -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' "$1" "$2"; }

# upstream NAME [ARGS]: a fresh upstream logging to $T/NAME.log; sets
# UPPID, UP.
upstream() {
  _un=$1; shift
  : > "$T/$_un.log"
  $PY "$HERE/ai_tpm_upstream.py" --limit $LIMIT --window $WINDOW --log "$T/$_un.log" "$@" \
    > "$T/$_un.up" 2> "$T/$_un.uperr" &
  UPPID=$!
  _p=$(listen_port "$T/$_un.up" $UPPID)
  [ -n "$_p" ] || { echo "upstream did not start: $(cat "$T/$_un.uperr")" >&2; exit 1; }
  UP="http://127.0.0.1:$_p"
}
upstream_stop() { kill "$UPPID"; wait "$UPPID" 2>/dev/null || true; }

# calls BASE FIRST OUT: N calls (bodies FIRST..FIRST+N-1), 4 at a time,
# through the proxy at BASE; their statuses in OUT. OpenAI's chat
# completions, or Anthropic's messages with API=anthropic.
API=openai
calls() {
  _b=b _path=v1/chat/completions
  [ "$API" = anthropic ] && _b=a _path=v1/messages
  seq "$2" $(($2 + N - 1)) | xargs -P 4 -I{} curl -s -o /dev/null -w '%{http_code}\n' \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: k{}' \
    --data-binary "@$T/$_b{}.json" "$1/$_path" > "$3"
}


figures() {
  _ok=$(grep -c ' ok ' "$T/$1.log" || true)
  _ref=$(grep -c ' refused ' "$T/$1.log" || true)
  echo "$1: upstream admitted $_ok, refused $_ref ($((100 * _ref / (_ok + _ref)))% of arrivals)"
}

# ---- one replica, --limiter: the figure to compare with -----------------------
upstream one
proxy_start one --upstream "$UP" --deadline 120s --limiter "$LIM/one"
calls "$PX" 0 "$T/one.codes"
proxy_stop
upstream_stop
check "one replica: every call succeeds ($(sort "$T/one.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(grep -c '^200$' "$T/one.codes")" = "$N" ]

# ---- two proxies and a batch worker through one Redis ---------------------------
upstream shared
proxy_start pa --upstream "$UP" --deadline 120s --limiter "$LIM"
PA=$PX PAPID=$PXPID
proxy_start pb --upstream "$UP" --deadline 120s --limiter "$LIM"
PB=$PX PBPID=$PXPID
$PY - "$T" "$UP" $N <<'EOF' > "$T/jobs.jsonl"
import json, sys
d, up, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(2 * n, 3 * n):
    print(json.dumps({"id": i, "url": up + "/v1/chat/completions", "method": "POST",
                      "idempotency_key": "j%d" % i,
                      "body": json.load(open("%s/b%d.json" % (d, i)))}))
EOF
"$STAGGER" batch -q "$T/jobs.jsonl" --db "$T/shared.db" -j 4 --deadline 120s --limiter "$LIM" \
  > "$T/batch.out" 2> "$T/batch.err" &
BPID=$!
calls "$PA" 0 "$T/pa.codes" &
CA=$!
calls "$PB" "$N" "$T/pb.codes"
wait "$CA"
set +e; wait "$BPID"; brc=$?; set -e
ledger="stagger:qs:${UP#http://}"
fields=$(redis-cli -p "$RPORT" hkeys "$ledger" | tr -d '\001' | tr '\n' ' ')
PXPID=$PAPID; proxy_stop
PXPID=$PBPID; proxy_stop
upstream_stop
check "the batch worker finished (exit $brc): $(cat "$T/batch.err")" [ "$brc" = 0 ]
check "every batch job is done" \
  [ "$(db_q "$T/shared.db" "SELECT count(*) FROM jobs WHERE state = 'done'")" = "$N" ]
check "proxy A: every call succeeds ($(sort "$T/pa.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(grep -c '^200$' "$T/pa.codes")" = "$N" ]
check "proxy B: every call succeeds ($(sort "$T/pb.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(grep -c '^200$' "$T/pb.codes")" = "$N" ]
check "the upstream's admitted tokens stay within burst + rate*t" bound shared
check "no Stagger-* field reached the upstream" sh -c "! grep -q stagger-header '$T/shared.log'"
check "the quota is held in Redis ($ledger) and names three replicas ($fields)" \
  [ "$(echo "$fields" | tr ' ' '\n' | grep -c '^t')" -ge 3 ]

# ---- two proxies on an Anthropic-like key: input and output tokens apart ----------
ALIMIT=2000  # input tokens
AOLIMIT=1500 # output tokens
upstream anthropic --dialect anthropic --out-limit $AOLIMIT --limit $ALIMIT
proxy_start xa --upstream "$UP" --deadline 120s --limiter "$LIM"
XA=$PX XAPID=$PXPID
proxy_start xb --upstream "$UP" --deadline 120s --limiter "$LIM"
API=anthropic
calls "$XA" 0 "$T/xa.codes" &
CA=$!
calls "$PX" "$N" "$T/xb.codes"
wait "$CA"
API=openai
aledger="stagger:qs:${UP#http://}"
afields=$(redis-cli -p "$RPORT" hkeys "$aledger" | tr -d '\001' | tr '\n' ' ')
proxy_stop
PXPID=$XAPID; proxy_stop
upstream_stop
check "Anthropic: every call succeeds ($(sort "$T/xa.codes" "$T/xb.codes" | uniq -c | tr '\n' ' '))" \
  [ "$(cat "$T/xa.codes" "$T/xb.codes" | grep -c '^200$')" = $((2 * N)) ]
# Input plus output tokens: within the two buckets' bounds together.
check "Anthropic: admitted tokens within burst + rate*t" bound anthropic $((ALIMIT + AOLIMIT))
check "Anthropic: input and output tokens are held apart in Redis ($afields)" \
  sh -c "echo '$afields' | grep -q 'u|input-tokens|' && echo '$afields' | grep -q 'u|output-tokens|'"

# ---- for comparison: two proxies, each alone ---------------------------------------
upstream alone
proxy_start qa --upstream "$UP" --deadline 120s
QA=$PX QAPID=$PXPID
proxy_start qb --upstream "$UP" --deadline 120s
calls "$QA" 0 "$T/qa.codes" &
CA=$!
calls "$PX" "$N" "$T/qb.codes"
wait "$CA"
proxy_stop
PXPID=$QAPID; proxy_stop
upstream_stop

figures one
figures shared
figures anthropic
figures alone
redis-cli -p "$RPORT" shutdown nosave > /dev/null 2>&1 || kill "$RPID"
wait "$RPID" 2>/dev/null || true
finish
