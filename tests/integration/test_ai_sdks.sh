#!/usr/bin/env bash
# The official LLM SDKs, unchanged (npm's openai and @anthropic-ai/sdk,
# pinned in tests/ai/package-lock.json, installed by this test), with their
# own retries off (maxRetries: 0) and their base URL at `stagger proxy`, in
# front of `stagger serve`'s LLM personas on 127.0.0.1:
#  - OpenAI with a tokens-per-minute quota (prompt + max_tokens counted at
#    arrival): every call succeeds, the program sees no 429, streams arrive
#    whole, the server's admitted tokens stay within LIMIT + LIMIT/W * t,
#    and it saw no request before the time its last answer named;
#  - Anthropic overloaded: 529 overloaded_error answers and streams that
#    fail at their first event (200, then event: error): every call
#    succeeds and every stream arrives whole, though each is a POST
#    without an Idempotency-Key (a refusal is retried for any method; a
#    stream that failed before it began is retried invisibly).
. "$(dirname "$0")/lib.sh"
scratch aisdk
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
command -v node >/dev/null 2>&1 || skip "node not installed: skipped"
NPM_DIR=$STG_BUILD_DIR/npm-ai
sh "$STG_SOURCE_DIR/tests/ai/install.sh" "$NPM_DIR" 2>"$T/npm.err" ||
  skip "the SDKs could not be installed from npm ($(tail -1 "$T/npm.err")): skipped"
cp "$STG_SOURCE_DIR/tests/ai/sdk_client.mjs" "$NPM_DIR/"
sdk() { (cd "$NPM_DIR" && node sdk_client.mjs "$@"); }
field() { $PY -c 'import json,sys; print(eval(sys.argv[2], {}, json.loads(sys.argv[1])))' "$1" "$2"; }
# No request before the time its last answer named: in the proxy's own
# log (t_us, its clock), an attempt whose answer named a wait
# (retry_after_ms: Retry-After, or the reset of a spent quota) at t is
# followed by no attempt of the same request that starts before t + the
# wait. (The server's own early count, per path, cannot tell a retry from
# another request that was already on its way when the answer left.)
polite() { # PROXY_LOG
  $PY - "$1" <<'PYEOF'
import json, sys
E = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
told, bad = {}, []
for e in E:
    if e.get("event") == "attempt_start" and e["id"] in told and e["t_us"] < told[e["id"]]:
        bad.append((e["id"], e["t_us"], told[e["id"]]))
    if e.get("event") == "attempt_end":
        told[e["id"]] = e["t_us"] + e.get("retry_after_ms", 0) * 1000
n = sum(1 for e in E if e.get("event") == "attempt_end" and e.get("retry_after_ms", 0) > 0)
if bad:
    sys.exit("%d retries before the named time, e.g. request %d at %d, named %d" % ((len(bad),) + bad[0]))
print("%d answers named a wait, no retry came before it" % n)
PYEOF
}

# The bucket bound of a token quota, from the server's own log (t_us: its
# clock): the tokens charged (less those given back) by the k-th admitted
# request are at most LIMIT + LIMIT/W * (t_k - t_first).
bound() { # LOG LIMIT WINDOW_S
  $PY - "$@" <<'PYEOF'
import json, sys
path, limit, window = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
L = [json.loads(l) for l in open(path) if '"ai"' in l]
adm = sorted([l for l in L if l["tokens_charged"] > 0], key=lambda l: l["t_us"])
t0, total = adm[0]["t_us"], 0
for l in adm:
    total += l["tokens_charged"] - l["tokens_refunded"]
    allowed = limit + limit * (l["t_us"] - t0) / (window * 1e6)
    if total > allowed + 1e-6:
        sys.exit("tokens %d by t=%dus, allowed %.1f" % (total, l["t_us"] - t0, allowed))
print("admitted %d, tokens %d" % (len(adm), total))
PYEOF
}

# ---- OpenAI: a tokens-per-minute quota ---------------------------------------------
# 3000 tokens per 3 s; each call asks 100 prompt tokens + 100 max_tokens,
# 36 calls (7200 tokens) 8 at a time: more than twice the quota.
serve_start oa --dialect openai --quota requests=10000/1m --quota tokens=3000/3s \
  --log "$T/oa.jsonl"
proxy_start oa --upstream "$URL" --log "$T/pxoa.log"
out=$(sdk --vendor openai --base "$PX/v1" --calls 24 --concurrency 8 --prompt-chars 400 --max-tokens 100)
check "openai SDK, 24 completions through the proxy: all succeed ($out)" \
  [ "$(field "$out" 'ok')" = 24 ]
check "... the program saw no error ($out)" [ "$(field "$out" 'len(errors)')" = 0 ]
out=$(sdk --vendor openai --base "$PX/v1" --calls 12 --concurrency 8 --prompt-chars 400 --max-tokens 100 --stream)
check "openai SDK, 12 streams: all succeed, all whole ($out)" \
  [ "$(field "$out" 'ok')" = 12 ] && [ "$(field "$out" 'whole')" = 12 ]
proxy_stop
serve_stop "$SRV_PID"
check "no send before the time the server's last answer named ($(polite "$T/pxoa.log" 2>&1))" \
  polite "$T/pxoa.log"
check "the server's admitted tokens stay within LIMIT + LIMIT/W * t ($(bound "$T/oa.jsonl" 3000 3 2>&1))" \
  bound "$T/oa.jsonl" 3000 3
check "the SDK's API key is not in the proxy's log" [ "$(grep -c 'sk-test-not-a-secret' "$T/pxoa.log")" = 0 ]

# ---- Anthropic: overloaded (529) and streams that fail at their first event -----------
serve_start an --dialect anthropic --overload-prob 0.2 --stream-error-prob 0.3 --seed 7 \
  --log "$T/an.jsonl"
proxy_start an --upstream "$URL" --log "$T/pxan.log" --retries 9
out=$(sdk --vendor anthropic --base "$PX" --calls 20 --concurrency 5)
check "anthropic SDK, 20 messages through the proxy: all succeed ($out)" \
  [ "$(field "$out" 'ok')" = 20 ] && [ "$(field "$out" 'len(errors)')" = 0 ]
out=$(sdk --vendor anthropic --base "$PX" --calls 20 --concurrency 5 --stream)
check "anthropic SDK, 20 streams: all succeed, all whole ($out)" \
  [ "$(field "$out" 'ok')" = 20 ] && [ "$(field "$out" 'whole')" = 20 ]
check "the server did answer 529 overloaded_error" \
  [ "$(grep -c '"ai":"overloaded"' "$T/an.jsonl")" -ge 1 ]
check "... and failed streams at their first event" \
  [ "$(grep -c '"ai":"stream_error"' "$T/an.jsonl")" -ge 1 ]
check "the proxy retried them as what they stand for" \
  grep -q '"stream_error":"overloaded_error"' "$T/pxan.log"
proxy_stop
check "no send before the time the server's last answer named ($(polite "$T/pxan.log" 2>&1))" \
  polite "$T/pxan.log"
finish
