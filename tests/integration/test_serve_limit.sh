#!/usr/bin/env bash
# stagger serve: the global limit. Admitted requests never exceed
# burst + rate * t (from the client's clock and, exactly, from the request
# log), every Retry-After form is well formed (seconds, HTTP-date, none),
# the rate-limit header fields are present and consistent, --limit-status.
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
start_server limit --rate $RATE --burst $BURST --ratelimit-headers \
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
assert admitted <= bound, (admitted, bound)
# The limiter is not stricter than asked: the offered load (300/s) is far
# above the rate, so nearly rate * t must get through.
assert admitted >= burst + rate * (elapsed - 0.3) * 0.8, (admitted, elapsed)
for status, h in results:
    lim, rem, reset = int(h["x-ratelimit-limit"]), int(h["x-ratelimit-remaining"]), int(h["x-ratelimit-reset"])
    assert lim == burst and 0 <= rem <= lim and 0 <= reset <= -(-burst // int(rate)), h
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
EOF
ok "admitted <= burst + rate * t (client clock and exact from the log)"

# --- Retry-After as an HTTP-date, and 503 as the limit status ----------------------
start_server date --rate 0.5 --burst 1 --retry-after date --limit-status 503
"$PYTHON" - "$PORT" <<'EOF' || fail "HTTP-date Retry-After"
import http.client, email.utils, time
c = http.client.HTTPConnection("127.0.0.1", int(__import__("sys").argv[1]), timeout=5)
statuses, dates = [], []
for i in range(3):
    c.request("GET", "/d%d" % i); r = c.getresponse(); r.read()
    statuses.append(r.status)
    if r.status == 503:
        dates.append(r.getheader("Retry-After"))
now = time.time()
assert statuses == [200, 503, 503], statuses
for v in dates:
    assert v.endswith(" GMT") and len(v) == 29, v          # IMF-fixdate
    t = email.utils.parsedate_to_datetime(v).timestamp()
    assert now - 1 <= t <= now + 4, (v, t - now)          # wait <= 2 s at 0.5/s
print("  Retry-After: %s (%.1f s ahead)" % (dates[0], email.utils.parsedate_to_datetime(dates[0]).timestamp() - now))
EOF
stop_server
ok "--retry-after date: IMF-fixdate within seconds of now; --limit-status 503"

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
start_server slow --rate 0.25 --burst 1
curl -s -o /dev/null "$URL/a"
curl -s -o /dev/null -D "$TMP/h" "$URL/b"
ra=$(grep -i '^Retry-After' "$TMP/h" | tr -d '\r' | awk '{print $2}')
[ "$ra" = 4 ] || fail "Retry-After at 0.25/s right after a take: '$ra', expected 4"
stop_server
ok "--retry-after seconds: ceil of the bucket's wait ($ra s at 0.25/s)"
