#!/usr/bin/env bash
# stagger serve --dialect openai|anthropic: the LLM API routes. The request
# body in the vendor's shape (400 otherwise, nothing charged), the tokens
# counted at arrival as the vendor counts them (OpenAI: prompt estimate +
# max_tokens x n, or the larger with --ai-count max; Anthropic: input and
# output tokens apart, the unused output given back), a JSON answer with a
# usage object, SSE in the vendor's event format, seeded 529/503
# overloads, streams that fail at their first event, the billing stop; the
# request log's tokens, and the protocol's bound on them: for a bucket
# quota, the tokens charged (less those given back) by the k-th admitted
# request are at most LIMIT + LIMIT/W * (t_k - t_first), t from the log's
# arrival times (the server's own clock). And what a client makes of the
# bodies: stagger fetch gives an insufficient_quota back at once
# (hard_stop) and retries a 529 overloaded_error. Python http.client, 127.0.0.1.
. "$(dirname "$0")/serve_test_lib.sh"
PXPID=""
# The proxies this test starts are stopped by their pid too, when it fails.
trap 'if [ "$BASHPID" = "$$" ] && [ -n "$PXPID" ] && serve_running "$PXPID"; then
          kill -TERM "$PXPID"; wait "$PXPID" 2>/dev/null || true; fi; cleanup' EXIT

stop_server() {
    local rc=0
    serve_stop "$SRV_PID" TERM || rc=$?
    SRV_PID=""
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIGTERM"
}

cat >"$TMP/ai.py" <<'EOF'
import http.client, json, sys, threading, time

port = int(sys.argv[1])

def post(path, body, client="ai-test", raw=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = raw if raw is not None else json.dumps(body)
    c.request("POST", path, body=data, headers={"X-Client-Id": client,
                                                "Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read().decode()
    h = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, h, out

def need(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)

def sse(text):
    """[(event or None, data)] of an SSE body."""
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        ev, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((ev, data))
    return out

def log(path):
    return [json.loads(l) for l in open(path)]
EOF
export AI_PY="$TMP/ai.py"

# --- openai: shape, usage, headers, the sum rule ------------------------------
serve_start oa --dialect openai --quota requests=1000/1m --quota tokens=100000/1000h \
    --ai-output-tokens 5 --log "$TMP/oa.jsonl" --stats "$TMP/oa.stats"
"$PYTHON" - "$PORT" <<'EOF' || fail "openai answers"
import json, os
exec(open(os.environ["AI_PY"]).read())
M = [{"role": "system", "content": "Be brief."},            # 9 chars
     {"role": "user", "content": [{"type": "text", "text": "Hello, world!"}]}]  # 13
st, h, b = post("/v1/chat/completions", {"model": "gpt-4o", "messages": M, "max_tokens": 50})
need(st == 200 and h["content-type"] == "application/json", "200 JSON: %d %s" % (st, h))
j = json.loads(b)
need(j["object"] == "chat.completion" and j["model"] == "gpt-4o", "shape %r" % j)
u = j["usage"]
need(u == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11}, "usage %r" % u)
need(j["choices"][0]["message"]["content"] == "tok tok tok tok tok", "text %r" % j)
need(j["choices"][0]["finish_reason"] == "stop", "finish %r" % j)
# counted at arrival: prompt 6 + max_tokens 50 = 56, and kept
need(int(h["x-ratelimit-remaining-tokens"]) == 100000 - 56, "remaining %r" % h)
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M, "max_completion_tokens": 3,
                                          "n": 2})
j = json.loads(b)
need(len(j["choices"]) == 2 and j["usage"]["completion_tokens"] == 6, "n=2 %r" % j)
need(j["choices"][1]["finish_reason"] == "length", "length %r" % j)
rem = int(h["x-ratelimit-remaining-tokens"])
need(100000 - 56 - 12 <= rem <= 100000 - 56 - 12 + 5, "n x max: remaining %d" % rem)
# no max_tokens: --ai-default-max-tokens (1024)
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M})
rem2 = int(h["x-ratelimit-remaining-tokens"])
need(rem - 1030 <= rem2 <= rem - 1030 + 5, "default max_tokens: %d -> %d" % (rem, rem2))
# a stream with usage: chunks, a usage chunk with no choices, [DONE]
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M, "max_tokens": 2,
                                          "stream": True,
                                          "stream_options": {"include_usage": True}})
need(st == 200 and h["content-type"] == "text/event-stream", "stream %d %r" % (st, h))
ev = sse(b)
need(ev[-1] == (None, "[DONE]"), "ends with [DONE]: %r" % ev[-1:])
chunks = [json.loads(d) for _, d in ev[:-1]]
need(all(c["object"] == "chat.completion.chunk" for c in chunks), "chunk objects")
text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
need(text == "tok tok", "streamed text %r" % text)
need(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2, "usage chunk")
# without include_usage: no usage (as OpenAI)
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M, "max_tokens": 2,
                                          "stream": True})
need(all("usage" not in json.loads(d) for _, d in sse(b)[:-1]), "no usage chunk")
# not a request of the API's shape: 400 invalid_request_error, nothing charged
for raw in ["{", "[]", json.dumps({"messages": M}), json.dumps({"model": "m", "messages": []}),
            json.dumps({"model": "m", "messages": M, "max_tokens": 0}),
            json.dumps({"model": "m", "messages": M, "n": 0})]:
    st, h, b = post("/v1/chat/completions", None, raw=raw)
    need(st == 400 and json.loads(b)["error"]["type"] == "invalid_request_error",
         "400 for %s: %d %s" % (raw, st, b))
# other paths answer as before
st, h, b = post("/v1/models", {"x": 1})
need(st == 200 and json.loads(b)["ok"] is True, "other path %d %s" % (st, b))
EOF
stop_server
"$PYTHON" - "$TMP/oa.jsonl" "$TMP/oa.stats" <<'EOF' || fail "openai log"
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
api = [l for l in L if l["path"] == "/v1/chat/completions"]
def need(c, w):
    if not c: raise SystemExit("FAIL: " + w)
need(api[0]["ai"] == "ok" and api[0]["tokens_in"] == 6 and api[0]["tokens_max_out"] == 50 and
     api[0]["tokens_charged"] == 56 and api[0]["tokens_out"] == 5 and
     api[0]["tokens_refunded"] == 0, "first line %r" % api[0])
need(api[1]["tokens_max_out"] == 6 and api[1]["tokens_out"] == 6, "n=2 line %r" % api[1])
need(api[3]["ai"] == "stream", "stream line %r" % api[3])
need(all(l["ai"] == "invalid" and l["tokens_charged"] == 0 for l in api[5:11]), "invalid lines")
other = [l for l in L if l["path"] != "/v1/chat/completions"]
need(other and all("ai" not in l for l in other), "no token fields on other paths")
ai = json.load(open(sys.argv[2]))["dialect"]["ai"]
for k, n in ai["requests"].items():
    need(n == sum(1 for l in api if l["ai"] == k), "stats %s: %d" % (k, n))
for k in ("tokens_charged", "tokens_out", "tokens_refunded"):
    need(ai[k] == sum(l[k] for l in api), "stats %s: %d" % (k, ai[k]))
EOF
ok "openai: the API's body, usage, SSE chunks, [DONE]; prompt + max_tokens x n counted at arrival"

# --- openai: Responses, the legacy Completions, Embeddings -----------------------
serve_start oar --dialect openai --quota tokens=100000/1000h --ai-output-tokens 3
"$PYTHON" - "$PORT" <<'EOF' || fail "openai responses, completions, embeddings"
import json, os
exec(open(os.environ["AI_PY"]).read())
def spent(h, before):
    return before - int(h["x-ratelimit-remaining-tokens"])
left = 100000
st, h, b = post("/v1/responses", {"model": "gpt-5", "instructions": "1234", "max_output_tokens": 9,
                                  "input": [{"role": "user", "content": [{"type": "input_text",
                                                                          "text": "12345678"}]}]})
j = json.loads(b)
need(st == 200 and j["object"] == "response" and j["status"] == "completed", "responses %s" % b)
need(j["usage"] == {"input_tokens": 3, "output_tokens": 3, "total_tokens": 6}, "usage %r" % j)
need(j["output"][0]["content"][0]["text"] == "tok tok tok", "text %r" % j)
need(spent(h, left) == 12, "charged 3 + 9: %r" % h); left -= 12
st, h, b = post("/v1/responses", {"model": "gpt-5", "input": "1234", "max_output_tokens": 2,
                                  "stream": True})
ev = sse(b)
types = [json.loads(d)["type"] for _, d in ev]
need(all(e == t for (e, _), t in zip(ev, types)), "event names are the types")
need(types[0] == "response.created" and types.count("response.output_text.delta") == 2 and
     types[-1] == "response.incomplete", "events %r" % types)
need(json.loads(ev[-1][1])["response"]["usage"]["output_tokens"] == 2, "usage at the end")
left -= 3
st, h, b = post("/v1/completions", {"model": "davinci", "prompt": ["1234", "1234"], "n": 2})
j = json.loads(b)
need(j["object"] == "text_completion" and len(j["choices"]) == 2, "completions %s" % b)
need(j["usage"]["prompt_tokens"] == 2 and j["usage"]["completion_tokens"] == 6, "usage %r" % j)
need(spent(h, left) == 2 + 32, "prompt + 16 (the default) x 2: %r" % h); left -= 34
st, h, b = post("/v1/embeddings", {"model": "text-embedding-3-small", "input": ["1234", "12345678"]})
j = json.loads(b)
need(j["object"] == "list" and len(j["data"]) == 2 and j["usage"] == {"prompt_tokens": 3,
                                                                       "total_tokens": 3}, b)
need(spent(h, left) == 3, "embeddings charge their input only: %r" % h)
EOF
stop_server
ok "openai: Responses (JSON and events), legacy Completions, Embeddings, each counted"

# --- --ai-count max ----------------------------------------------------------
serve_start oamax --dialect openai --quota tokens=1000/1000h --ai-count max
"$PYTHON" - "$PORT" <<'EOF' || fail "--ai-count max"
import json, os
exec(open(os.environ["AI_PY"]).read())
M = [{"role": "user", "content": "x" * 400}]      # 100 tokens
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M, "max_tokens": 30})
need(int(h["x-ratelimit-remaining-tokens"]) == 900, "max(100, 30): %r" % h)
st, h, b = post("/v1/chat/completions", {"model": "m", "messages": M, "max_tokens": 300})
r = int(h["x-ratelimit-remaining-tokens"])
need(900 - 300 <= r <= 900 - 300 + 5, "max(100, 300): %d" % r)
EOF
stop_server
ok "--ai-count max: the larger of the prompt and max_tokens"

# --- the bound: tokens admitted within LIMIT + LIMIT/W * t -------------------
bound_check() { # LOG QUOTA_LIMIT WINDOW_S FIELD...
    "$PYTHON" - "$@" <<'EOF'
import json, sys
path, limit, window = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
kind = sys.argv[4]   # total | in | out
L = [json.loads(l) for l in open(path) if '"ai"' in l]
adm = sorted([l for l in L if l["tokens_charged"] > 0], key=lambda l: l["t_us"])
ref = [l for l in L if l["status"] == 429]
if len(adm) < 5 or len(ref) < 3:
    raise SystemExit("FAIL: too few admitted (%d) or refused (%d) to test" % (len(adm), len(ref)))
t0, total = adm[0]["t_us"], 0
for l in adm:
    c = {"total": l["tokens_charged"] - l["tokens_refunded"],
         "in": l["tokens_in"], "out": l["tokens_max_out"] - l["tokens_refunded"]}[kind]
    total += c
    allowed = limit + limit * (l["t_us"] - t0) / (window * 1e6)
    if total > allowed + 1e-6:
        raise SystemExit("FAIL: %s tokens %d by t=%dus, allowed %.1f" % (kind, total,
                                                                           l["t_us"] - t0, allowed))
print("admitted %d, refused %d, %s tokens %d" % (len(adm), len(ref), kind, total))
EOF
}
load() { # PATH BODYGEN... : 4 clients for 2 s, honouring nothing (refusals are the point)
    "$PYTHON" - "$PORT" "$1" <<'EOF'
import json, os, random, sys, threading, time
exec(open(os.environ["AI_PY"]).read())
path = sys.argv[2]
def run(k):
    rnd = random.Random(k)
    end = time.time() + 2
    while time.time() < end:
        body = {"model": "m", "messages": [{"role": "user", "content": "y" * rnd.randrange(4, 400)}],
                "max_tokens": rnd.randrange(1, 120), "stream": rnd.random() < 0.3}
        post(path, body, client="load")
        time.sleep(0.01)
ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
EOF
}
serve_start oab --dialect openai --quota requests=100000/1m --quota tokens=600/1s \
    --log "$TMP/oab.jsonl"
load /v1/chat/completions
stop_server
bound_check "$TMP/oab.jsonl" 600 1 total || fail "openai tokens bound"
ok "openai: tokens admitted within LIMIT + LIMIT/W * t (from the log)"

serve_start anb --dialect anthropic --quota requests=100000/1m --quota tokens=100000/1m \
    --quota input-tokens=500/1s --quota output-tokens=300/1s --ai-output-tokens 20 \
    --log "$TMP/anb.jsonl"
load /v1/messages
stop_server
bound_check "$TMP/anb.jsonl" 500 1 in || fail "anthropic input-tokens bound"
bound_check "$TMP/anb.jsonl" 300 1 out || fail "anthropic output-tokens bound"
ok "anthropic: input and output tokens admitted within their LIMIT + LIMIT/W * t"

# --- anthropic: shape, events, the unused output given back ------------------
serve_start an --dialect anthropic --quota output-tokens=100/1000h --ai-output-tokens 16 \
    --log "$TMP/an.jsonl"
"$PYTHON" - "$PORT" <<'EOF' || fail "anthropic answers"
import json, os
exec(open(os.environ["AI_PY"]).read())
B = {"model": "claude-x", "system": "be brief", "max_tokens": 40,
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello there!"}]}]}
st, h, b = post("/v1/messages", B)
j = json.loads(b)
need(st == 200 and j["type"] == "message" and j["role"] == "assistant", "shape %r" % j)
need(j["usage"] == {"input_tokens": 5, "output_tokens": 16}, "usage %r" % j["usage"])
need(j["stop_reason"] == "end_turn" and j["content"][0]["type"] == "text", "content %r" % j)
need(int(h["anthropic-ratelimit-output-tokens-remaining"]) == 60, "charged 40: %r" % h)
need(int(h["anthropic-ratelimit-input-tokens-remaining"]) == 40000 - 5, "input: %r" % h)
st, h, b = post("/v1/messages", dict(B, stream=True))
need(st == 200 and h["content-type"] == "text/event-stream", "stream")
ev = sse(b)
names = [e for e, _ in ev]
need(names[:3] == ["message_start", "content_block_start", "ping"] and
     names[-3:] == ["content_block_stop", "message_delta", "message_stop"] and
     names.count("content_block_delta") == 16, "events %r" % names)
need(all(json.loads(d)["type"] == e for e, d in ev), "each data's type is its event")
need(json.loads(ev[0][1])["message"]["usage"]["input_tokens"] == 5, "message_start usage")
need(json.loads(ev[-2][1])["usage"]["output_tokens"] == 16, "message_delta usage")
# the first answer gave back 40 - 16 = 24: 100 - 40 + 24 - 40 = 44 (+ refill)
r = int(h["anthropic-ratelimit-output-tokens-remaining"])
need(44 <= r <= 45, "the unused output given back: remaining %d" % r)
st, h, b = post("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
e = json.loads(b)
need(st == 400 and e["type"] == "error" and e["error"]["type"] == "invalid_request_error" and
     "max_tokens" in e["error"]["message"], "max_tokens required: %d %s" % (st, b))
EOF
stop_server
"$PYTHON" - "$TMP/an.jsonl" <<'EOF' || fail "anthropic log"
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
need = lambda c, w: None if c else sys.exit("FAIL: " + w)
need(L[0]["tokens_charged"] == 45 and L[0]["tokens_out"] == 16 and
     L[0]["tokens_refunded"] == 24, "refund line %r" % L[0])
need(L[2]["ai"] == "invalid" and L[2]["tokens_charged"] == 0, "invalid line %r" % L[2])
EOF
ok "anthropic: Messages shape, the stream's events, usage, output given back"

# --- overloads, stream errors, the billing stop: seeded and deterministic ----
overload_run() { # persona path -> the statuses and ai outcomes
    serve_start ov --dialect "$1" --overload-prob 0.3 --stream-error-prob 0.4 --seed 11 \
        --log "$TMP/ov.jsonl"
    "$PYTHON" - "$PORT" "$2" <<'EOF'
import json, os, sys
exec(open(os.environ["AI_PY"]).read())
for i in range(30):
    st, h, b = post(sys.argv[2], {"model": "m", "max_tokens": 5, "stream": i % 2 == 0,
                                  "messages": [{"role": "user", "content": "hi"}]})
    print(st, "error" if ('"error"' in b and st == 200) else "-")
EOF
    stop_server
}
for persona in anthropic openai; do
    [ $persona = anthropic ] && path=/v1/messages || path=/v1/chat/completions
    overload_run $persona $path >"$TMP/ov1.txt" || fail "$persona overload run"
    cp "$TMP/ov.jsonl" "$TMP/ov1.jsonl"
    overload_run $persona $path >"$TMP/ov2.txt" || fail "$persona overload run 2"
    cmp -s "$TMP/ov1.txt" "$TMP/ov2.txt" || fail "$persona: one seed, two different runs"
    "$PYTHON" - "$persona" "$TMP/ov1.jsonl" "$TMP/ov.jsonl" <<'EOF' || fail "$persona overloads"
import json, sys
persona = sys.argv[1]
L = [json.loads(l) for l in open(sys.argv[2])]
need = lambda c, w: None if c else sys.exit("FAIL %s: %s" % (persona, w))
over = [l for l in L if l["ai"] == "overloaded"]
serr = [l for l in L if l["ai"] == "stream_error"]
code = 529 if persona == "anthropic" else 503
need(over and all(l["status"] == code and l["tokens_charged"] == 0 for l in over),
     "overloads %r" % over)
need(serr and all(l["status"] == 200 and l["tokens_charged"] > 0 and l["tokens_out"] == 0
                  for l in serr), "stream errors %r" % serr)
if persona == "anthropic":
    need(all(l["tokens_refunded"] == l["tokens_max_out"] for l in serr), "all output back")
strip = lambda ls: [(l["status"], l["ai"]) for l in ls]
need(strip(L) == strip([json.loads(l) for l in open(sys.argv[3])]), "logs differ")
EOF
done
# the bodies themselves
serve_start ovb --dialect anthropic --overload-prob 1
"$PYTHON" - "$PORT" <<'EOF' || fail "529 body"
import json, os
exec(open(os.environ["AI_PY"]).read())
st, h, b = post("/v1/messages", {"model": "m", "max_tokens": 5,
                                 "messages": [{"role": "user", "content": "hi"}]})
need(st == 529 and json.loads(b) == {"type": "error", "error": {"type": "overloaded_error",
                                                                 "message": "Overloaded"}}, b)
need("retry-after" not in h, "no wait told")
EOF
stop_server
for persona in anthropic openai; do
    [ $persona = anthropic ] && path=/v1/messages || path=/v1/chat/completions
    serve_start se --dialect $persona --stream-error-prob 1
    "$PYTHON" - "$PORT" "$persona" "$path" <<'EOF' || fail "$persona stream error"
import json, os, sys
exec(open(os.environ["AI_PY"]).read())
st, h, b = post(sys.argv[3], {"model": "m", "max_tokens": 5, "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]})
ev = sse(b)
need(st == 200 and h["content-type"] == "text/event-stream" and len(ev) == 1, "%d %r" % (st, ev))
if sys.argv[2] == "anthropic":
    need(ev[0][0] == "error" and json.loads(ev[0][1])["error"]["type"] == "overloaded_error", b)
else:
    need(ev[0][0] is None and json.loads(ev[0][1])["error"]["type"] == "server_error", b)
# a request that does not stream is answered whole
st, h, b = post(sys.argv[3], {"model": "m", "max_tokens": 5,
                              "messages": [{"role": "user", "content": "hi"}]})
need(st == 200 and "usage" in json.loads(b), "not streamed: %d %s" % (st, b))
EOF
    stop_server
done
ok "seeded 529/503 overloads and first-event stream errors, the same for one seed"

serve_start iq --dialect openai --insufficient-quota-after 2
"$PYTHON" - "$PORT" <<'EOF' || fail "insufficient_quota"
import json, os
exec(open(os.environ["AI_PY"]).read())
B = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
s = [post("/v1/chat/completions", B) for _ in range(4)]
need([x[0] for x in s] == [200, 200, 429, 429], "statuses %r" % [x[0] for x in s])
e = json.loads(s[2][2])["error"]
need(e["type"] == "insufficient_quota" and e["code"] == "insufficient_quota" and
     "exceeded your current quota" in e["message"], "body %r" % e)
need("retry-after" not in s[2][1], "no wait told")
EOF
ok "--insufficient-quota-after: 429 insufficient_quota after N answers"

# --- what stagger fetch makes of these bodies (issue #31 item 4) --------------
BODY='{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
"$STAGGER" fetch -sS -X POST --idempotency-key k1 -d "$BODY" --log-json "$TMP/f1.jsonl" \
    "http://127.0.0.1:$PORT/v1/chat/completions" >"$TMP/f1.out" 2>"$TMP/f1.err" && rc=0 || rc=$?
stop_server
[ "$rc" = 1 ] || fail "fetch after insufficient_quota exited $rc (want 1): $(cat "$TMP/f1.err")"
"$PYTHON" - "$TMP/f1.jsonl" <<'EOF' || fail "fetch: insufficient_quota"
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
att = [l for l in L if l.get("event") == "attempt_end" or l.get("type") == "attempt_end"]
txt = open(sys.argv[1]).read()
if "hard_stop" not in txt or len(att) > 1:
    raise SystemExit("FAIL: want one attempt and reason hard_stop:\n" + txt)
EOF
serve_start ovf --dialect anthropic --overload-prob 0.5 --seed 2
"$STAGGER" fetch -sS -X POST --idempotency-key k2 -d "$BODY" --log-json "$TMP/f2.jsonl" \
    "http://127.0.0.1:$PORT/v1/messages" >"$TMP/f2.out" 2>"$TMP/f2.err" ||
    fail "fetch through 529 overloads: $(cat "$TMP/f2.err")"
stop_server
grep -q '"status":529' "$TMP/f2.jsonl" || fail "seed 2 drew no 529 first: $(cat "$TMP/f2.jsonl")"
grep -q '"usage"' "$TMP/f2.out" || fail "no answer after the overloads: $(cat "$TMP/f2.out")"
ok "fetch: insufficient_quota given back at once (hard_stop), 529 overloaded_error retried"

# --- the same through stagger proxy (the engine's path) -----------------------
proxy_up() { # UPSTREAM_URL: sets PXPID, PX
    "$STAGGER" proxy --listen 127.0.0.1:0 --upstream "$1" --idempotency-key auto \
        --log "$TMP/px.jsonl" >"$TMP/px.out" 2>"$TMP/px.err" &
    PXPID=$!
    SRV_PIDS="${SRV_PIDS:-} $PXPID"
    for _ in $(seq 600); do # a hang guard: the loop ends at the line
        grep -q '^listening on http://127.0.0.1:' "$TMP/px.out" 2>/dev/null && break
        kill -0 "$PXPID" 2>/dev/null || break
        sleep 0.05
    done
    PX=$(sed -n '1s|^listening on \(http://127.0.0.1:[0-9]*\)$|\1|p' "$TMP/px.out")
    [ -n "$PX" ] || fail "proxy did not start: $(cat "$TMP/px.err")"
}
proxy_down() {
    local rc=0
    serve_stop "$PXPID" TERM || rc=$?
    PXPID=""
    [ "$rc" -eq 0 ] || fail "proxy exited $rc after SIGTERM"
}
serve_start pxiq --dialect openai --insufficient-quota-after 1 --log "$TMP/pxiq.jsonl"
proxy_up "http://127.0.0.1:$PORT"
for i in 1 2; do
    code=$(curl -s -o "$TMP/pxiq.$i" -w '%{http_code}' -X POST -d "$BODY" "$PX/v1/chat/completions")
    echo "$code" >>"$TMP/pxiq.codes"
done
proxy_down
stop_server
[ "$(tr '\n' ' ' <"$TMP/pxiq.codes")" = "200 429 " ] || fail "proxy codes $(cat "$TMP/pxiq.codes")"
grep -q insufficient_quota "$TMP/pxiq.2" || fail "the program gets the body: $(cat "$TMP/pxiq.2")"
n=$(grep -c '"status":429' "$TMP/pxiq.jsonl" || true)
[ "$n" = 1 ] || fail "the server saw $n refused sends (want 1: given back at once)"
serve_start pxov --dialect anthropic --overload-prob 0.5 --seed 2 --log "$TMP/pxov.jsonl"
proxy_up "http://127.0.0.1:$PORT"
for i in 1 2 3 4; do
    curl -s -o "$TMP/pxov.$i" -w '%{http_code}\n' -X POST -d "$BODY" "$PX/v1/messages" \
        >>"$TMP/pxov.codes"
done
proxy_down
stop_server
[ "$(sort -u "$TMP/pxov.codes")" = 200 ] || fail "proxy through overloads: $(cat "$TMP/pxov.codes")"
grep -q '"status":529' "$TMP/pxov.jsonl" || fail "seed 2 drew no 529 at all"
ok "proxy: insufficient_quota given back after one send, 529 overloaded_error retried unseen"

# --- and through stagger batch (the engine again, with its store) -------------
serve_start btiq --dialect openai --insufficient-quota-after 1 --log "$TMP/btiq.jsonl"
"$PYTHON" - "$URL" "$BODY" >"$TMP/btiq.in" <<'EOF'
import json, sys
for i in range(4):
    print(json.dumps({"id": "j%d" % i, "url": sys.argv[1] + "/v1/chat/completions",
                      "method": "POST", "body": sys.argv[2], "idempotency_key": "bk-%d" % i}))
EOF
rc=0
timeout -k 5 120 "$STAGGER" batch -q -j 1 --db "$TMP/bt.db" "$TMP/btiq.in" >"$TMP/bt.out" \
    2>"$TMP/bt.err" || rc=$?
stop_server
"$PYTHON" - "$TMP/btiq.jsonl" <<'EOF' || fail "batch: insufficient_quota (batch exit $rc: $(tail -2 "$TMP/bt.err"))"
import collections, json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
sends = collections.Counter(l["key"] for l in L)
st = [l["status"] for l in L]
if st.count(200) != 1 or st.count(429) != 3 or max(sends.values()) != 1:
    raise SystemExit("FAIL: want one answer and three refusals each sent once: %r %r" % (st, sends))
EOF
"$STAGGER" batch report --db "$TMP/bt.db" --json >"$TMP/bt.report"
"$PYTHON" - "$TMP/bt.report" <<'EOF' || fail "batch: the refused jobs are kept for a later run"
import json, sys
st = json.load(open(sys.argv[1]))["states"]
if st.get("done") != 1 or st.get("deferred") != 3:
    raise SystemExit("FAIL: states %r" % st)
EOF
ok "batch: insufficient_quota jobs sent once each, none retried, deferred"
