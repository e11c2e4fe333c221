#!/usr/bin/env bash
# stagger serve: per-client fail-first, outage windows, resets, hangs, slow
# bodies, seeded determinism, and a prompt clean stop while connections are
# parked. Real clients (curl, python) against 127.0.0.1 only.
. "$(dirname "$0")/serve_test_lib.sh"

# start_server NAME ARGS...: sets SRV_PID, PORT, URL (serve_lib.sh).
start_server() { serve_start "$@"; }
# stop_server [MAX_MS]: SIGTERM; must exit 0 within MAX_MS (default 5000).
stop_server() {
    local rc=0 max=${1:-5000} t0 t1
    t0=$(date +%s%N)
    kill -TERM "$SRV_PID"
    for _ in $(seq $((max / 20))); do
        serve_running "$SRV_PID" || break
        sleep 0.02
    done
    serve_running "$SRV_PID" && fail "server still running ${max} ms after SIGTERM"
    wait "$SRV_PID" || rc=$?
    t1=$(date +%s%N)
    SRV_PID=""
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIGTERM"
    STOP_MS=$(((t1 - t0) / 1000000))
}
# get [curl args...]: prints "CODE EXIT" (never fails).
get() {
    local code rc=0
    code=$(curl -s -o /dev/null -w '%{http_code}' "$@") || rc=$?
    echo "$code $rc"
}

# --- fail-first: per X-Client-Id, else per path ------------------------------------
start_server ff --fail-first 2 --fail-retry-after 3 --stats "$TMP/ff.stats"
seq_a=""
seq_b=""
for i in 1 2 3 4; do
    seq_a="$seq_a $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client-Id: A' "$URL/x/$i")"
    [ "$i" -le 3 ] && seq_b="$seq_b $(curl -s -o /dev/null -w '%{http_code}' -H 'X-Client-Id: B' "$URL/y/$i")"
done
[ "$seq_a" = " 429 429 200 200" ] || fail "client A got$seq_a"
[ "$seq_b" = " 429 429 200" ] || fail "client B got$seq_b"
seq_p=""
for i in 1 2 3; do
    seq_p="$seq_p $(curl -s -o /dev/null -w '%{http_code}' "$URL/p1")"
done
[ "$seq_p" = " 429 429 200" ] || fail "path /p1 got$seq_p"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/p2")" = 429 ] || fail "/p2 not counted apart"
curl -s -D "$TMP/h" -o "$TMP/b" -H 'X-Client-Id: C' "$URL/z"
grep -q '^Retry-After: 3' "$TMP/h" || fail "fail-first Retry-After: $(cat "$TMP/h")"
grep -q '"fail-first"' "$TMP/b" || fail "fail-first body: $(cat "$TMP/b")"
stop_server
"$PYTHON" -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["fail_first"] == 2 + 2 + 2 + 1 + 1 and d["admitted"] == 2 + 1 + 1, d' "$TMP/ff.stats" ||
    fail "fail-first stats: $(cat "$TMP/ff.stats")"
ok "--fail-first 2: two 429s per X-Client-Id (A, B apart), per path without it"

# --- outage windows, measured from server start --------------------------------------
start_server outage --outage 2s+700ms --outage 3s+300ms --log "$TMP/outage.log"
"$PYTHON" - "$PORT" "$TMP/outage.res" <<'EOF' || fail "outage run"
import http.client, json, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
res = []
t0 = time.monotonic()
while time.monotonic() - t0 < 3.8:   # the server started earlier
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/o"); r = c.getresponse(); r.read()
    res.append((r.status, r.getheader("Retry-After")))
    c.close()
    time.sleep(0.05)
json.dump(res, open(out, "w"))
EOF
stop_server
"$PYTHON" - "$TMP/outage.log" "$TMP/outage.res" <<'EOF' || fail "outage windows"
import json, math, sys
log = [json.loads(l) for l in open(sys.argv[1])]
res = json.load(open(sys.argv[2]))
assert len(log) == len(res) >= 25, (len(log), len(res))
windows = [(2.0e6, 2.7e6), (3.0e6, 3.3e6)]
inside = 0
for rec, (status, ra) in zip(log, res):
    t = rec["t_us"]
    w = [(a, b) for a, b in windows if a <= t < b]
    assert rec["status"] == status
    if w:
        inside += 1
        assert status == 503, (t, status)
        assert ra == str(max(1, math.ceil((w[0][1] - t) / 1e6))), (t, ra)
    else:
        assert status == 200 and ra is None, (t, status, ra)
assert inside >= 5, inside
assert any(r["t_us"] < 2e6 for r in log) and any(r["t_us"] >= 3.3e6 for r in log), [r["t_us"] for r in log]
print("  %d requests, %d inside the windows" % (len(log), inside))
EOF
ok "--outage: 503 + Retry-After (rest of the window) inside, 200 before, between, after"

# --- reset and hang on a schedule; hangs do not block others ---------------------------
start_server rh --reset-every 4 --hang-every 3 --threads 1 --stats "$TMP/rh.stats" --log "$TMP/rh.log"
# Requests: 1 200, 2 200, 3 hang, 4 reset, 5 200, 6 hang (kept open), 7 200.
r1=$(get "$URL/1")
r2=$(get "$URL/2")
hang_rc=0
curl -s -o /dev/null --max-time 1.5 "$URL/3" || hang_rc=$?
[ "$hang_rc" -eq 28 ] || fail "hung request: curl exit $hang_rc, expected 28"
r4=$(get "$URL/4")
r5=$(get "$URL/5")
[ "$r1 $r2 $r5" = "200 0 200 0 200 0" ] || fail "plain requests: $r1 / $r2 / $r5"
case "$r4" in "000 52" | "000 56") ;; *) fail "reset request: '$r4', expected curl exit 52 or 56" ;; esac
# While one request hangs, others (same single worker thread) are answered.
curl -s -o /dev/null --max-time 20 "$URL/6" &
HANG_PID=$!
sleep 0.3
r=$(get --max-time 2 "$URL/7")
[ "$r" = "200 0" ] || fail "request during a hang: $r"
ok "--reset-every 4: curl exit ${r4#* }; --hang-every 3: curl --max-time exit 28; others still served"

# --- a clean stop with a hung connection and a trickling body ------------------------
stop_server 3000
wait "$HANG_PID" && fail "hung client got an answer" || true
"$PYTHON" -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["faults"]["resets"] == 1 and d["faults"]["hangs"] == 2, d' "$TMP/rh.stats" ||
    fail "stats: $(cat "$TMP/rh.stats")"
[ "$(grep -c '"status":"reset"' "$TMP/rh.log")" = 1 ] || fail "log resets"
[ "$(grep -c '"status":"hang"' "$TMP/rh.log")" = 2 ] || fail "log hangs"
ok "SIGTERM with a hung connection: exit 0 in ${STOP_MS} ms; faults counted and logged"

# --- slow bodies: trickled over --slow-body-ms, without blocking the worker --------------
start_server slow --slow-body-every 1 --slow-body-ms 800 --threads 1
"$PYTHON" - "$PORT" <<'EOF' || fail "slow bodies"
import http.client, json, sys, threading, time
port = int(sys.argv[1])
times, bodies = [], []
def one(i):
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/slow/%d" % i); r = c.getresponse(); b = r.read()
    times.append(time.monotonic() - t); bodies.append((r.status, b))
t0 = time.monotonic()
ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
for t in ts: t.start()
for t in ts: t.join(20)
total = time.monotonic() - t0
assert len(times) == 6
assert all(s == 200 and json.loads(b)["ok"] for s, b in bodies), bodies
assert min(times) >= 0.75, times          # trickled over ~800 ms
assert total < 1.6, total                 # in parallel on one worker thread
print("  6 slow bodies on 1 thread: each %.2f-%.2f s, all in %.2f s" % (min(times), max(times), total))
EOF
curl -s -o /dev/null --max-time 10 "$URL/slow/late" &
SLOW_PID=$!
sleep 0.2
stop_server 3000
wait "$SLOW_PID" && fail "slow body completed although the server stopped" || true
ok "slow bodies take --slow-body-ms, run in parallel; SIGTERM mid-body exits 0 in ${STOP_MS} ms"

# --- probabilities are deterministic under --seed ----------------------------------------
run_seed() { # SEED -> outcome sequence of 30 sequential requests, from the log
    start_server "seed$1" --reset-prob 0.3 --hang-prob 0.1 --seed "$1" --log "$TMP/seed$1.log"
    "$PYTHON" - "$PORT" <<'PY'
import http.client, sys
for i in range(30):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=0.5)
    try:
        c.request("GET", "/s/%d" % i); c.getresponse().read()
    except OSError:
        pass                     # reset (connection closed) or hang (timeout)
    c.close()
PY
    stop_server
    "$PYTHON" -c '
import json, sys
print(" ".join(str(json.loads(l)["status"]) for l in open(sys.argv[1])))' "$TMP/seed$1.log"
}
a=$(run_seed 42)
b=$(run_seed 42)
c=$(run_seed 7)
[ "$a" = "$b" ] || fail "seed 42 twice: '$a' vs '$b'"
[ "$a" != "$c" ] || fail "seeds 42 and 7 gave the same faults"
echo "$a" | grep -q reset || fail "no reset at p=0.3 in 30: $a"
[ "$(echo "$a" | wc -w)" = 30 ] || fail "log lines: $a"
ok "--reset-prob/--hang-prob with --seed: same seed, same faults ($(echo "$a" | tr ' ' '\n' | sort | uniq -c | tr -s ' \n' ' '))"

# --- one name, many servers; SIGTERM right after "listening" ----------------------------
# serve_start must read the line of the server it just started, never the
# one a previous server of the same name left in NAME.out (whose port is
# closed by now), and a server that printed "listening" has its stop
# signals in hand: a SIGTERM at once is a clean stop (exit 0), not 143.
for i in $(seq 10); do
    start_server again --stats "$TMP/again.stats"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/again/$i")" = 200 ] ||
        fail "restart $i: no answer on $URL (a stale line from an earlier server?)"
    stop_server
    "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["admitted"] == 1, d' \
        "$TMP/again.stats" || fail "restart $i: stats of another server: $(cat "$TMP/again.stats")"
    rm -f "$TMP/again.stats"
    start_server again
    stop_server
done
ok "10 restarts under one name: each answered on its own port; SIGTERM at once exits 0"
