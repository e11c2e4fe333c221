#!/usr/bin/env bash
# stagger serve: the global limit. Admitted requests never exceed
# burst + rate * t (from the client's clock and, exactly, from the request
# log), and the limit is not stricter than asked: replaying the GCRA on the
# server's own arrival times gives exactly the server's decisions. Every
# Retry-After form is well formed (seconds, HTTP-date, none) with values
# bounded by the protocol (the bucket's wait, the instants around the
# exchange), the rate-limit header fields are present and consistent,
# --limit-status. No assertion depends on how fast the machine is: bounds
# come from the protocol and the server's log, never a throughput floor.
# Clients: python threads on keep-alive connections and curl, 127.0.0.1 only.
. "$(dirname "$0")/serve_test_lib.sh"

# start_server NAME ARGS...: sets SRV_PID, PORT, URL (serve_lib.sh).
start_server() { serve_start "$@"; }
# stop_server [SIG]: SIGTERM (or SIG); the server must exit 0 within 5 s.
stop_server() {
    local rc=0
    serve_stop "$SRV_PID" "${1:-TERM}" || rc=$?
    SRV_PID=""
    [ "$rc" -ne 124 ] || fail "server still running 5 s after SIG${1:-TERM}"
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIG${1:-TERM}"
}

# --- 300 requests from 30 keep-alive workers at --rate 50 --burst 10 -------------
RATE=50
BURST=10
# One server thread: the bucket's decisions then follow the order of the
# logged arrival instants, so the replay below is exact. (The bucket under
# concurrent takers is tests/unit/test_bucket.c's.)
start_server limit --rate $RATE --burst $BURST --ratelimit-headers --threads 1 \
    --log "$TMP/limit.log" --stats "$TMP/limit.stats"
"$PYTHON" - "$PORT" "$RATE" "$BURST" "$TMP/client.json" <<'EOF' || fail "limit run"
import http.client, json, sys, threading, time
port, rate, burst, out = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
WORKERS, EACH, PACE = 30, 10, 0.1          # 300 requests over about 1 s
results, lock = [], threading.Lock()
def worker(w):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(EACH):
        conn.request("GET", "/item/%d-%d" % (w, i), headers={"X-Client-Id": "w%d" % w})
        r = conn.getresponse()
        r.read()
        with lock:
            results.append((r.status, {k.lower(): v for k, v in r.getheaders()}))
        time.sleep(PACE)
    conn.close()
t0 = time.monotonic()
ts = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
for t in ts: t.start()
for t in ts: t.join(30)
elapsed = time.monotonic() - t0
assert len(results) == WORKERS * EACH, len(results)
admitted = sum(1 for s, _ in results if s == 200)
limited = sum(1 for s, _ in results if s == 429)
assert admitted + limited == len(results), [s for s, _ in results]
bound = burst + rate * elapsed
print("  admitted %d, limited %d in %.3f s; bound burst + rate*t = %.1f" % (admitted, limited, elapsed, bound))
# The client's interval contains every server arrival, so the bound holds
# on its clock too.
assert admitted <= bound, (admitted, bound)
for status, h in results:
    lim, rem, reset = int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), int(h["x-ratelimit-reset"])
    # Limit is the policy's quota (R per 1 s), not the burst (issue #37:
    # Limit 5 / Reset 1 beside q=20;w=1 made a client pace at 5/s)
    assert lim == int(rate) and 0 <= rem <= burst and 0 <= reset <= -(-burst // int(rate)), h
    assert h["ratelimit"] == '"default";r=%d;t=%d' % (rem, reset), h
    assert h["ratelimit-policy"] == '"default";q=%d;w=1' % rate, h
    if status == 429:
        ra = h["retry-after"]
        assert ra.isdigit() and int(ra) == 1, ra           # ceil(wait <= 20 ms) = 1
        assert rem == 0 and reset >= int(ra), h
    else:
        assert "retry-after" not in h, h
json.dump({"admitted": admitted, "limited": limited, "elapsed": elapsed}, open(out, "w"))
EOF
stop_server
"$PYTHON" - "$TMP/limit.log" "$TMP/limit.stats" "$TMP/client.json" "$RATE" "$BURST" <<'EOF' || fail "limit log"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
st = json.load(open(sys.argv[2])); cl = json.load(open(sys.argv[3]))
rate, burst = float(sys.argv[4]), int(sys.argv[5])
assert len(log) == 300, len(log)
adm = sorted(r["t_us"] for r in log if r["status"] == 200)
assert len(adm) == cl["admitted"] == st["admitted"], (len(adm), cl, st["admitted"])
assert st["limited"] == cl["limited"] == sum(1 for r in log if r["status"] == 429)
assert st["total"] == 300 and sum(st["per_second"]) == 300
# Exact check on the server's own arrival times: in every interval [a, b]
# between two admitted arrivals, at most burst + rate * (b - a) admitted.
worst = max(j - i + 1 - rate * (adm[j] - adm[i]) / 1e6
            for i in range(len(adm)) for j in range(i, len(adm)))
print("  log: %d admitted; max over intervals of admitted - rate*t = %.3f (burst %d)" % (len(adm), worst, burst))
assert worst <= burst + 1e-6, worst
assert st["max_in_1s"] >= st["max_in_10ms"] >= 1
# Not stricter than asked, exactly: replay the GCRA (bucket.h: T = ceil(1e9
# / rate) ns, admit when max(TAT, now) + T - now <= burst * T) on the
# logged arrival instants, in order. Requests logged at the same microsecond
# are interchangeable, so the admitted count per instant must match.
T = -(-10**9 // int(rate))
assert T * int(rate) == 10**9, "the replay needs a rate whose T is whole"
tat, replay, logged = None, {}, {}
for r in sorted(log, key=lambda r: r["t_us"]):
    now = r["t_us"] * 1000
    new = (max(tat, now) if tat is not None else now) + T
    admit = new - now <= burst * T
    if admit:
        tat = new
    replay[r["t_us"]] = replay.get(r["t_us"], 0) + admit
    logged[r["t_us"]] = logged.get(r["t_us"], 0) + (r["status"] == 200)
diff = [(t, logged[t], replay[t]) for t in sorted(logged) if logged[t] != replay[t]]
print("  replay: %d admitted by the model, %d by the server" % (sum(replay.values()), len(adm)))
assert not diff, diff[:5]
EOF
ok "admitted <= burst + rate * t (client clock and exact from the log); decisions = GCRA replay"

# --- Retry-After as an HTTP-date, and 503 as the limit status ----------------------
start_server date --rate 0.5 --burst 1 --retry-after date --limit-status 503
"$PYTHON" - "$PORT" <<'EOF' || fail "HTTP-date Retry-After"
import http.client, email.utils, math, time
c = http.client.HTTPConnection("127.0.0.1", int(__import__("sys").argv[1]), timeout=30)
statuses, dates = [], []
before = time.time()
for i in range(3):
    c.request("GET", "/d%d" % i); r = c.getresponse(); r.read()
    statuses.append(r.status)
    if r.status == 503:
        dates.append(r.getheader("Retry-After"))
after = time.time()
# The first request takes the only token (burst 1); the next two are
# refused unless 2 s (1 / 0.5/s) passed, which the exchange's span tells.
if after - before < 2:
    assert statuses == [200, 503, 503], statuses
assert dates, statuses
for v in dates:
    assert v.endswith(" GMT") and len(v) == 29, v          # IMF-fixdate
    t = email.utils.parsedate_to_datetime(v).timestamp()
    # Answered between `before` and `after`: the date is ceil(wall + wait),
    # the wait at least 1 s (serve's minimum) and at most one token's (2 s).
    assert before + 1 - 1e-3 <= t <= math.ceil(after + 2), (v, before, after)
print("  Retry-After: %s (%.1f s ahead)" % (dates[0], email.utils.parsedate_to_datetime(dates[0]).timestamp() - after))
EOF
stop_server
ok "--retry-after date: IMF-fixdate bounded by the exchange and the wait; --limit-status 503"

# --- no Retry-After --------------------------------------------------------------
start_server none --rate 1 --burst 1 --retry-after none
curl -s -o /dev/null "$URL/a"
curl -s -o /dev/null -D "$TMP/h" -w '%{http_code}' "$URL/b" >"$TMP/code"
[ "$(cat "$TMP/code")" = 429 ] || fail "second request gave $(cat "$TMP/code")"
grep -qi '^Retry-After' "$TMP/h" && fail "--retry-after none sent $(grep -i '^Retry-After' "$TMP/h")"
grep -qi '^X-RateLimit' "$TMP/h" && fail "rate-limit headers without --ratelimit-headers"
stop_server
ok "--retry-after none: no Retry-After"

# --- seconds for a slow rate: ceil of the wait --------------------------------------
start_server slow --rate 0.25 --burst 1 --log "$TMP/slow.log"
curl -s -o /dev/null "$URL/a"
curl -s -o /dev/null -D "$TMP/h" "$URL/b"
ra=$(grep -i '^Retry-After' "$TMP/h" | tr -d '\r' | awk '{print $2}')
stop_server
# gap us after a take the bucket's wait is 4 s - gap (T = 4 s, burst 1);
# Retry-After is its ceiling in seconds. The gap is the server's, logged.
want=$("$PYTHON" -c '
import json, sys
t = sorted(json.loads(l)["t_us"] for l in open(sys.argv[1]))
assert len(t) == 2, t
print(max(0, -(-(4000000 - (t[1] - t[0])) // 1000000)))' "$TMP/slow.log") || fail "slow log"
[ "$ra" = "$want" ] || fail "Retry-After at 0.25/s: '$ra', the bucket's wait gives $want"
ok "--retry-after seconds: ceil of the bucket's wait ($ra s at 0.25/s)"

# --- one policy in every dialect (issue #37) ----------------------------------------
# --rate 20 --burst 5 --ratelimit-headers: every field names 20 per 1 s, never the
# burst as a limit; with a persona, whose own fields (Discord's and GitHub's are
# X-RateLimit-* too) describe its own quotas, no field name appears twice with two
# values, and the IETF pair "default" describes the --rate limit.
for d in none ietf openai anthropic github discord shopify x azure kong stripe; do
    if [ "$d" = none ]; then start_server rl-none --rate 20 --burst 5 --ratelimit-headers
    else start_server "rl-$d" --rate 20 --burst 5 --ratelimit-headers --dialect "$d"; fi
    curl -s -o /dev/null -D "$TMP/h.$d" "$URL/items/1"
    stop_server
    "$PYTHON" - "$TMP/h.$d" "$d" <<'PYEOF' || fail "dialect $d: the rate-limit fields disagree"
import sys
fields = {}
for line in open(sys.argv[1], encoding="latin-1"):
    if ":" in line and not line.startswith("HTTP/"):
        k, v = line.split(":", 1)
        fields.setdefault(k.strip().lower(), []).append(v.strip())
d = sys.argv[2]
for k, vs in fields.items():
    if k in ("ratelimit", "ratelimit-policy"):    # SF lists: lines join; names unique
        names = [p.strip().split(";")[0] for v in vs for p in v.split(",")]
        assert len(names) == len(set(names)), (d, k, vs)
    else:
        assert len(set(vs)) == 1, (d, k, vs)      # no name with two values
pol = [p.strip() for v in fields.get("ratelimit-policy", []) for p in v.split(",")]
assert '"default";q=20;w=1' in pol, (d, pol)
if d == "none":
    assert fields["x-ratelimit-limit"] == ["20"], fields
    assert int(fields["x-ratelimit-remaining"][0]) <= 5, fields
PYEOF
done
ok "--ratelimit-headers: one policy (20 per 1 s) in every dialect, no field twice"
