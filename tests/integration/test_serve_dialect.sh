#!/usr/bin/env bash
# stagger serve --dialect NAME: every persona answers with the header fields
# its provider documents (names and value formats: Go durations, RFC 3339,
# epoch seconds, float seconds, used/size, pk byte sequences), enforces its
# quotas (bounds from the protocol: a window admits at most LIMIT, a bucket
# at most LIMIT + LIMIT/W * t, and neither refuses before it has to), and
# counts early retries: a retry sent at once after a refusal that asked for
# a wait is counted, one sent at the instant the refusal told (read the way
# that provider's clients read it) is not, and is admitted. Clients: python
# http.client on one keep-alive connection, 127.0.0.1 only.
. "$(dirname "$0")/serve_test_lib.sh"

stop_server() {
    local rc=0
    serve_stop "$SRV_PID" TERM || rc=$?
    SRV_PID=""
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIGTERM"
}

cat >"$TMP/check.py" <<'EOF'
import base64, email.utils, http.client, json, math, re, sys, time
from datetime import datetime, timezone

persona, port = sys.argv[1], int(sys.argv[2])
CLIENT = "dt-" + persona
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

def get(path, headers=None):
    h = {"X-Client-Id": CLIENT}
    h.update(headers or {})
    before = time.time()
    conn.request("GET", path, headers=h)
    r = conn.getresponse()
    body = r.read()
    after = time.time()
    hd = {}
    for k, v in r.getheaders():
        hd[k.lower()] = v
    return {"status": r.status, "h": hd, "raw": r.getheaders(), "body": body,
            "before": before, "after": after}

def stats():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/__stats")
    return json.loads(c.getresponse().read())

def early():
    return stats()["early_retries"]

def need(cond, what):
    if not cond:
        raise SystemExit("FAIL %s: %s" % (persona, what))

GO = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s|(\d+)ms)$")
def go_seconds(v):
    m = GO.match(v)
    need(m, "not a Go duration: %r" % v)
    h, mi, s, ms = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0) + int(ms or 0) / 1000.0

def rfc3339(v):
    need(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", v), "not RFC 3339: %r" % v)
    return datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()

def integer(v):
    need(re.match(r"^\d+$", v or ""), "not an integer: %r" % v)
    return int(v)

def decimal(v, places):
    need(re.match(r"^\d+\.\d{%d}$" % places, v or ""), "not %d-place decimal: %r" % (places, v))
    return float(v)

def no(r, *names):
    for n in names:
        need(n not in r["h"], "unexpected %s: %r" % (n, r["h"].get(n)))

# Per persona: fields(r) checks an answer's fields and returns the
# remaining count of the quota under test; told(r) is the instant a client
# of that provider reads from a refusal (None: no hint).
def ietf_fields(r):
    pk = base64.b64encode(CLIENT.encode()).decode()
    pol = r["h"]["ratelimit-policy"]
    need(pol == '"short";q=3;qu="requests";w=1;pk=:%s:, "long";q=100;qu="requests";w=60;pk=:%s:'
         % (pk, pk), "RateLimit-Policy %r" % pol)
    m = re.match(r'^"short";r=(\d+);t=(\d+);pk=:%s:, "long";r=(\d+);t=(\d+);pk=:%s:$'
                 % (re.escape(pk), re.escape(pk)), r["h"]["ratelimit"])
    need(m, "RateLimit %r" % r["h"]["ratelimit"])
    need(int(m.group(2)) <= 1 and int(m.group(4)) <= 60, "t beyond the window")
    return int(m.group(1))
def ietf_told(r):
    need(r["status"] == 429 and r["h"]["content-type"] == "application/problem+json", "refusal")
    b = json.loads(r["body"])
    need(b["type"].endswith("#quota-exceeded") and b["violated-policies"] == ["short"], b)
    return r["after"] + integer(r["h"]["retry-after"])

def openai_fields(r):
    for q in ("requests", "tokens"):
        integer(r["h"]["x-ratelimit-limit-" + q])
        integer(r["h"]["x-ratelimit-remaining-" + q])
        go_seconds(r["h"]["x-ratelimit-reset-" + q])
    need(r["h"]["x-ratelimit-limit-requests"] == "3", "limit-requests")
    need(r["h"]["x-ratelimit-limit-tokens"] == "1000", "limit-tokens")
    return integer(r["h"]["x-ratelimit-remaining-requests"])
def openai_told(r):
    need(r["status"] == 429, "status %d" % r["status"])
    ms, s = integer(r["h"]["retry-after-ms"]), integer(r["h"]["retry-after"])
    need(s == math.ceil(ms / 1000.0), "retry-after %d vs retry-after-ms %d" % (s, ms))
    need(json.loads(r["body"])["error"]["code"] == "rate_limit_exceeded", r["body"])
    return r["after"] + ms / 1000.0

def anthropic_fields(r):
    for q in ("requests", "tokens", "input-tokens", "output-tokens"):
        integer(r["h"]["anthropic-ratelimit-%s-limit" % q])
        integer(r["h"]["anthropic-ratelimit-%s-remaining" % q])
        t = rfc3339(r["h"]["anthropic-ratelimit-%s-reset" % q])
        need(r["before"] - 1 <= t <= r["after"] + 61, "reset %r" % t)
    return integer(r["h"]["anthropic-ratelimit-requests-remaining"])
def anthropic_told(r):
    need(r["status"] == 429, "status %d" % r["status"])
    need(json.loads(r["body"])["error"]["type"] == "rate_limit_error", r["body"])
    return r["after"] + integer(r["h"]["retry-after"])

def github_fields(r):
    for n in ("limit", "remaining", "used", "reset"):
        integer(r["h"]["x-ratelimit-" + n])
    need(int(r["h"]["x-ratelimit-used"]) + int(r["h"]["x-ratelimit-remaining"]) ==
         int(r["h"]["x-ratelimit-limit"]), "used + remaining != limit")
    need(r["before"] - 1 <= int(r["h"]["x-ratelimit-reset"]) <= r["after"] + 2, "epoch reset")
    need(r["h"]["x-ratelimit-resource"] == "core", "resource")
    return integer(r["h"]["x-ratelimit-remaining"])
def github_told(r):
    need(r["status"] == 403 and r["h"]["x-ratelimit-remaining"] == "0", "primary refusal")
    no(r, "retry-after")
    return integer(r["h"]["x-ratelimit-reset"])

def discord_fields(r):
    integer(r["h"]["x-ratelimit-limit"])
    decimal(r["h"]["x-ratelimit-reset"], 3)
    need(decimal(r["h"]["x-ratelimit-reset-after"], 3) <= 1.0, "reset-after beyond the window")
    need(re.match(r"^[0-9a-f]{16}$", r["h"]["x-ratelimit-bucket"]), "bucket")
    return integer(r["h"]["x-ratelimit-remaining"])
def discord_told(r):
    need(r["status"] == 429 and r["h"]["x-ratelimit-scope"] == "user", "bucket refusal")
    no(r, "x-ratelimit-global")
    b = json.loads(r["body"])
    after = decimal(r["h"]["x-ratelimit-reset-after"], 3)
    need(b["global"] is False and abs(b["retry_after"] - after) < 1e-9, b)
    need(integer(r["h"]["retry-after"]) == math.ceil(after), "Retry-After")
    return r["after"] + after

def shopify_fields(r):
    m = re.match(r"^(\d+)/(\d+)$", r["h"]["x-shopify-shop-api-call-limit"])
    need(m and m.group(2) == "3", "call limit %r" % r["h"]["x-shopify-shop-api-call-limit"])
    return 3 - int(m.group(1))
def shopify_told(r):
    need(r["status"] == 429, "status")
    return r["after"] + decimal(r["h"]["retry-after"], 1)

def x_fields(r):
    integer(r["h"]["x-rate-limit-limit"])
    need(r["before"] - 1 <= integer(r["h"]["x-rate-limit-reset"]) <= r["after"] + 2, "reset")
    no(r, "x-ratelimit-limit", "retry-after")
    return integer(r["h"]["x-rate-limit-remaining"])
def x_told(r):
    need(r["status"] == 429 and r["h"]["x-rate-limit-remaining"] == "0", "refusal")
    no(r, "retry-after")
    return integer(r["h"]["x-rate-limit-reset"])

def azure_fields(r):
    return integer(r["h"]["x-ratelimit-remaining-requests"])
def azure_told(r):
    need(r["status"] == 429, "status")
    no(r, "retry-after")
    ms = integer(r["h"]["x-ms-retry-after-ms"])
    need(r["h"]["retry-after-ms"] == str(ms), "retry-after-ms")
    return r["after"] + ms / 1000.0

def kong_fields(r):
    for w in ("second", "minute", "hour"):
        integer(r["h"]["x-ratelimit-limit-" + w])
        integer(r["h"]["x-ratelimit-remaining-" + w])
    need(r["h"]["x-ratelimit-limit-second"] == "3", "limit-second")
    rem = integer(r["h"]["x-ratelimit-remaining-second"])
    need(integer(r["h"]["ratelimit-remaining"]) == rem, "RateLimit-Remaining is the tightest")
    need(integer(r["h"]["ratelimit-reset"]) <= 1, "RateLimit-Reset")
    return rem
def kong_told(r):
    need(r["status"] == 429, "status")
    return r["after"] + integer(r["h"]["retry-after"])

def stripe_fields(r):
    if r["status"] == 200:
        no(r, "stripe-should-retry", "retry-after")
    return None
def stripe_told(r):
    need(r["status"] == 429 and r["h"]["stripe-should-retry"] == "true", "refusal")
    no(r, "retry-after")
    return None

P = {
    # name: (fields, told, kind, limit, window_s, refusal status)
    "ietf": (ietf_fields, ietf_told, "window", 3, 1),
    "openai": (openai_fields, openai_told, "bucket", 3, 1),
    "anthropic": (anthropic_fields, anthropic_told, "bucket", 3, 1),
    "github": (github_fields, github_told, "window", 3, 1),
    "discord": (discord_fields, discord_told, "window", 3, 1),
    "shopify": (shopify_fields, shopify_told, "bucket", 3, 1),
    "x": (x_fields, x_told, "window", 3, 1),
    "azure": (azure_fields, azure_told, "bucket", 3, 1),
    "kong": (kong_fields, kong_told, "window", 3, 1),
    "stripe": (stripe_fields, stripe_told, "bucket", 3, 1),
}
fields, told, kind, L, W = P[persona]

# 1. Enforcement: 8 requests in a row, on fresh paths (no retries).
rs = [get("/item/e%d" % i, {"X-Token-Cost": "7"}) for i in range(8)]
admitted = 0
for i, r in enumerate(rs):
    need(r["status"] in (200, 403, 429), "status %d" % r["status"])
    rem = fields(r)
    if r["status"] == 200:
        admitted += 1
    else:
        told(r)
    if kind == "window":
        # Window k is [kW, (k+1)W) of the wall clock the server reads too: a
        # request whose before and after fall in one window was decided in it.
        k = int(r["before"] // W)
        if k == int(r["after"] // W):
            same = [q for q in rs[:i] if int(q["after"] // W) == k]
            maybe = [q for q in rs[:i] if int(q["after"] // W) >= k and int(q["before"] // W) <= k]
            n_same = sum(q["status"] == 200 for q in same if int(q["before"] // W) == k)
            n_maybe = sum(q["status"] == 200 for q in maybe)
            if r["status"] == 200:
                need(n_same + 1 <= L, "window %d admitted %d > %d" % (k, n_same + 1, L))
            else:
                need(n_maybe >= L, "refused with only %d admitted in its window" % n_maybe)
    else:
        # A bucket starts full and gains L per W, capped at L: admitted units
        # never exceed L + L/W * (time since the first decision); a refusal
        # needs a point s (the start, or when it was last full) after which
        # more than L - 1 + L/W * (now - s) units were admitted. s lies before
        # some decision j, and now - s >= before_i - after_j.
        elapsed_max = r["after"] - rs[0]["before"]
        done = sum(q["status"] == 200 for q in rs[:i])
        if r["status"] == 200:
            need(done + 1 <= L + L / W * elapsed_max, "bucket over-admitted")
        else:
            need(any(sum(q["status"] == 200 for q in rs[j:i]) + 1 >
                     L + L / W * max(0.0, r["before"] - rs[j]["after"]) - 1e-9
                     for j in range(i + 1)), "bucket refused before it had to")
    if rem is not None and r["status"] == 200 and kind == "window":
        need(0 <= rem < L, "remaining %d" % rem)
need(any(r["status"] != 200 for r in rs), "8 requests at once and nothing refused")
print("  %s: %d of 8 admitted (limit %d per %d s, %s)" % (persona, admitted, L, W, kind))

# 2. Early retries: the first refused path, again at once (early when the
# refusal told a wait), then at the told instant (not early, admitted).
e0 = early()
ref = next(r for r in rs if r["status"] != 200)
path = "/item/e%d" % rs.index(ref)
at = told(ref)
again = get(path, {"X-Token-Cost": "7"})
e1 = early()
if at is not None and again["before"] < at:
    need(e1["total"] == e0["total"] + 1, "an immediate retry was not counted early: %r" % e1)
    need(e1["by_client"].get(CLIENT) == e1["total"], e1)
else:
    need(e1["total"] == e0["total"], "a retry after a refusal without a hint counted early")
if again["status"] != 200:
    at = told(again) if at is not None else None
elif at is not None:
    # Admitted: the retry met a new window (the burst straddled a boundary
    # of the wall clock, as a busy machine can make it), so the server
    # keeps no told instant for the path and there is no polite retry left
    # to check; steps 1 and the early count above still held.
    print("  %s: the immediate retry met a new window and was admitted" % persona)
    sys.exit(0)
if at is not None:
    time.sleep(max(0.0, at - time.time()) + 0.002)
    polite = get(path, {"X-Token-Cost": "7"})
    e2 = early()
    need(e2["total"] == e1["total"], "a retry at the told instant counted early: %r" % e2)
    need(e2["checked"] > e1["checked"], "the polite retry was not checked")
    need(polite["status"] == 200, "refused at the told instant: %d %r" % (polite["status"], polite["h"]))
    print("  %s: immediate retry counted early; retry at the told instant admitted, not early" % persona)
else:
    print("  %s: no hint, so no retry is early (%d)" % (persona, e1["total"]))
EOF

run_persona() {
    local name=$1
    shift
    serve_start "$name" --dialect "$name" "$@" --stats "$TMP/$name.stats"
    "$PYTHON" "$TMP/check.py" "$name" "$PORT" || fail "persona $name"
    stop_server
    grep -q "^stagger serve: early retries: [0-9]" "$TMP/$name.err" ||
        fail "$name: no early-retry line at exit: $(cat "$TMP/$name.err")"
    "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dialect"]["name"] == sys.argv[2]; assert "early_retries" in d' \
        "$TMP/$name.stats" "$name" || fail "$name: stats file"
}

run_persona ietf --quota short=3/1s
run_persona openai --quota requests=3/1s --quota tokens=1000/1s
run_persona anthropic --quota requests=3/1s
run_persona github --quota core=3/1s
run_persona discord --quota bucket=3/1s
run_persona shopify --quota calls=3/1s
run_persona x --quota requests=3/1s
run_persona azure --quota requests=3/1s
run_persona kong --quota second=3/1s
run_persona stripe --quota requests=3/1s
ok "every persona: documented fields, quotas enforced within the protocol's bounds, early retries counted"

# --- tokens: a request's cost comes from X-Token-Cost, else --token-cost --------
serve_start tokens --dialect openai --quota requests=100/1m --quota tokens=100/1m --token-cost 30
"$PYTHON" - "$PORT" <<'EOF' || fail "token costs"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
def get(p, cost=None):
    c.request("GET", p, headers={"X-Token-Cost": cost} if cost else {})
    r = c.getresponse(); r.read()
    return r.status, int(r.getheader("x-ratelimit-remaining-tokens"))
s1, t1 = get("/a")            # 30 (the default cost)
s2, t2 = get("/b", "50")      # 50
s3, t3 = get("/c", "50")      # 50 > what is left: refused, nothing charged
assert (s1, s2, s3) == (200, 200, 429), (s1, s2, s3)
# 60 us of refill at 100/min is far below a token; remaining is floored.
assert t1 in (70, 71) and t2 in (20, 21) and t3 in (20, 21), (t1, t2, t3)
EOF
stop_server
ok "token quotas charge X-Token-Cost, else --token-cost; a refusal charges nothing"

# --- Go durations as OpenAI writes them: ms, s, m and h forms -------------------------
serve_start godur --dialect openai --quota requests=1000/1s --quota tokens=10000/2h
"$PYTHON" - "$PORT" <<'EOF' || fail "go durations"
import http.client, re, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
def get(p, cost):
    c.request("GET", p, headers={"X-Token-Cost": str(cost)}); r = c.getresponse(); r.read()
    return r.getheader("x-ratelimit-reset-requests"), r.getheader("x-ratelimit-reset-tokens")
rq, tk = get("/a", 9000)   # 9000 of 10000 per 2 h: full again in 1h48m, less what refilled
assert re.match(r"^(1h47m59(\.\d{1,3})?s|1h48m0s)$", tk), tk
assert re.match(r"^[1-9]\d{0,2}ms$|^1s$", rq), rq        # one request of 1000/s: 1ms
rq, tk = get("/b", 0)
assert re.match(r"^(1h4[78]m\d{1,2}(\.\d{1,3})?s)$", tk), tk
EOF
stop_server
ok "x-ratelimit-reset-* are Go durations (1h48m0s, 1ms)"

# --- GitHub: a resource per path, secondary limit without retry-after ---------------
serve_start gh --dialect github --quota core=100/1m --quota search=2/1m --quota secondary=4/1m
"$PYTHON" - "$PORT" <<'EOF' || fail "github resources"
import http.client, json, sys
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def get(p):
    c.request("GET", p, headers={"X-Client-Id": "gh"})
    r = c.getresponse(); b = r.read()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, b
st, h, _ = get("/search/code?q=1")
assert st == 200 and h["x-ratelimit-resource"] == "search" and h["x-ratelimit-limit"] == "2", h
st, h, _ = get("/repos/a/b")
assert st == 200 and h["x-ratelimit-resource"] == "core" and h["x-ratelimit-remaining"] == "99", h
st, h, _ = get("/search/issues")
assert st == 200 and h["x-ratelimit-remaining"] == "0", h
st, h, b = get("/search/users")           # the search resource is spent; core is not
assert st == 403 and h["x-ratelimit-remaining"] == "0" and "retry-after" not in h, (st, h)
assert "rate limit exceeded" in json.loads(b)["message"], b
st, h, _ = get("/repos/c/d")              # 4th admitted: the secondary limit (4) is reached
assert st == 200, st
st, h, b = get("/repos/e/f")              # secondary: 403, remaining > 0, no retry-after
assert st == 403 and int(h["x-ratelimit-remaining"]) > 0 and "retry-after" not in h, (st, h)
assert "secondary rate limit" in json.loads(b)["message"], b
st, h, b = get("/repos/e/f")              # a retry within the minute GitHub asks for
assert st == 403, st
s = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
s.request("GET", "/__stats"); d = json.loads(s.getresponse().read())
assert d["early_retries"]["by_client"] == {"gh": 1}, d["early_retries"]
q = {x["name"]: x for x in d["dialect"]["quotas"]}
assert q["search"]["refused"] == 1 and q["secondary"]["refused"] == 2, q
EOF
stop_server
ok "github: resources by path, 403 primary with remaining 0, 403 secondary without retry-after"

# --- Discord: a bucket per route, and the global limit -------------------------------
serve_start dc --dialect discord --quota bucket=2/1m --quota global=3/1m
"$PYTHON" - "$PORT" <<'EOF' || fail "discord buckets"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
def get(p):
    c.request("GET", p)
    r = c.getresponse(); b = r.read()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, b
s1, h1, _ = get("/channels/1/messages")
s2, h2, _ = get("/channels/2/messages")
s3, h3, _ = get("/guilds/1")
assert (s1, s2, s3) == (200, 200, 200)
assert h1["x-ratelimit-bucket"] == h2["x-ratelimit-bucket"] != h3["x-ratelimit-bucket"], (h1, h3)
assert h2["x-ratelimit-remaining"] == "0" and h3["x-ratelimit-remaining"] == "1"
s4, h4, b4 = get("/guilds/2")             # 4th request: the global limit (3) refuses it
assert s4 == 429 and h4["x-ratelimit-global"] == "true" and h4["x-ratelimit-scope"] == "global", h4
assert "x-ratelimit-bucket" not in h4 and json.loads(b4)["global"] is True, (h4, b4)
assert int(h4["retry-after"]) >= 1
EOF
stop_server
ok "discord: routes share a bucket by first segment, the global limit answers with Global/Scope"

# --- Anthropic 529 and Stripe verdicts on error answers -------------------------------
serve_start an --dialect anthropic --quota overload=1/1m
"$PYTHON" - "$PORT" <<'EOF' || fail "anthropic 529"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
for i, want in enumerate((200, 529, 529)):
    c.request("GET", "/v1/messages")
    r = c.getresponse(); b = r.read()
    assert r.status == want, (i, r.status)
    if want == 529:
        assert json.loads(b)["error"]["type"] == "overloaded_error", b
        assert r.getheader("retry-after") is None
EOF
stop_server
serve_start st --dialect stripe
for code in 400:false 402:false 409:true 500:true 503:true 200:; do
    got=$(curl -s -o /dev/null -D - "$URL/status/${code%%:*}" | tr -d '\r' |
        sed -n 's/^Stripe-Should-Retry: //Ip')
    [ "$got" = "${code#*:}" ] || fail "stripe /status/${code%%:*}: Stripe-Should-Retry '$got', want '${code#*:}'"
done
stop_server
ok "anthropic: 529 overloaded without a hint; stripe: Stripe-Should-Retry on error answers"

# --- who is a client: X-Client-Id, else the peer address; --client-by-addr -----------
for mode in header addr; do
    extra=()
    [ "$mode" = addr ] && extra=(--client-by-addr)
    serve_start cid --dialect x --quota requests=2/1m "${extra[@]}"
    "$PYTHON" - "$PORT" "$mode" <<'EOF' || fail "client id ($mode)"
import http.client, json, sys
port, mode = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def get(p, who=None):
    c.request("GET", p, headers={"X-Client-Id": who} if who else {})
    r = c.getresponse(); r.read()
    return r.status
got = [get("/a", "c1"), get("/b", "c1"), get("/c", "c2"), get("/d"), get("/e")]
if mode == "header":   # c1, c2 and 127.0.0.1 are three clients: 2 each
    assert got == [200, 200, 200, 200, 200], got
    assert get("/f") == 429 and get("/g", "c2") == 200 and get("/h", "c1") == 429
else:                  # one client, 127.0.0.1, whatever it sends
    assert got == [200, 200, 429, 429, 429], got
get("/c", "c9")        # /c again at once: early only for 127.0.0.1 (refused it)
s = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
s.request("GET", "/__stats"); e = json.loads(s.getresponse().read())["early_retries"]
assert e["by_client"] == ({} if mode == "header" else {"127.0.0.1": 1}), e
EOF
    stop_server
done
ok "quotas and early retries per X-Client-Id, else per address; --client-by-addr ignores the header"

# --- early retries without a persona: the global limit's and fail-first's Retry-After --
serve_start plain --rate 0.5 --burst 1 --fail-first 1 --fail-retry-after 2
"$PYTHON" - "$PORT" <<'EOF' || fail "early retries, plain server"
import http.client, json, sys, time
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def get(p, who):
    c.request("GET", p, headers={"X-Client-Id": who}); r = c.getresponse(); r.read()
    return r.status, r.getheader("Retry-After"), time.time()
def early():
    s = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    s.request("GET", "/__stats"); return json.loads(s.getresponse().read())["early_retries"]
st, ra, t = get("/p", "ff")               # fail-first: 429, Retry-After 2
assert st == 429 and ra == "2", (st, ra)
get("/p", "ff")                           # at once: early
assert early()["by_client"] == {"ff": 1}, early()
time.sleep(max(0.0, t + 2 - time.time()) + 0.01)
st, ra, t = get("/p", "ff")               # polite: not early (the limiter may refuse it)
assert early()["total"] == 1, early()
if st == 429:                             # the global limit: its own Retry-After
    get("/p", "ff")
    assert early()["total"] == 2, early()
EOF
stop_server
ok "early retries count the global limit's and --fail-first's Retry-After too"

# --- usage errors ------------------------------------------------------------------
for args in "--dialect nope" "--quota requests=1/1s" "--dialect x --quota nope=1/1s" \
    "--dialect x --quota requests=abc/1s" "--dialect x --quota requests" "--token-cost 5"; do
    set +e
    # shellcheck disable=SC2086
    timeout 10 "$STAGGER" serve $args >"$TMP/u.out" 2>"$TMP/u.err"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || [ "$rc" -eq 1 ] || fail "serve $args: exit $rc"
    [ -s "$TMP/u.err" ] || fail "serve $args: no message"
done
ok "bad --dialect / --quota / --token-cost are refused with a message"
