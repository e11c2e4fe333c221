#!/usr/bin/env bash
# stagger batch against every `stagger serve --dialect` persona: no job lost
# (every job done), 0 early retries (no retry arrives before the instant
# the refusal it answers told the client), and the server's own log shows
# no more admitted than the persona's quotas allow (a window quota: at most
# LIMIT per wall-clock window; a bucket: at most LIMIT + LIMIT/W * t over
# any interval t; token quotas counted in tokens). The jobs of the token
# personas declare their cost ("cost": {"tokens": C}) and send it
# (X-Token-Cost: C), so client and server charge the same. The time against
# the ideal is printed, not asserted (bench/bench_dialects.sh measures it).
# The long windows (ietf long, kong minute and hour) are sized so that the
# short window binds: a client that spreads a long window's remaining count
# over its reset (issue 15, "pace, don't burst") then runs at the short
# window's rate, and the run takes seconds.
# Needs the client side of issue 15 (branches hints and quota: the dialect
# table and the quota limiter); on the server side alone, GitHub's 403 is an
# auth failure and several hints are unread. Window quotas are 20 per 2 s,
# so that a reset can be further away than a client's plain backoff: a
# client that does not read the persona's reset retries early.
# STG_DIALECTS="a b" runs only those personas. Only 127.0.0.1 is contacted.
. "$(dirname "$0")/serve_test_lib.sh"

N=40
COST=50
BAD=""
# bad NAME WHY: a persona failed; the others still run, the test fails at the end.
bad() { echo "FAIL: $1: $2" >&2; BAD="$BAD $1"; }

stop_server() {
    local rc=0
    serve_stop "$SRV_PID" TERM || rc=$?
    SRV_PID=""
    [ "$rc" -eq 0 ] || fail "server exited $rc after SIGTERM"
}

# run NAME QUOTA... : a batch of N jobs against the persona NAME.
run() {
    local name=$1
    shift
    case " ${STG_DIALECTS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    local args=()
    for q in "$@"; do args+=(--quota "$q"); done
    serve_start "$name" --dialect "$name" "${args[@]}" --log "$TMP/$name.log" \
        --stats "$TMP/$name.stats"
    "$PYTHON" - "$URL" "$N" "$COST" >"$TMP/$name.jsonl" <<'EOF'
import json, sys
url, n, cost = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    print(json.dumps({"id": "j%03d" % i, "url": "%s/track/j%03d" % (url, i),
                      "headers": {"X-Token-Cost": str(cost)}, "cost": {"tokens": cost}}))
EOF
    local t0 t1 rc=0
    t0=$(date +%s%N)
    timeout -k 5 120 "$STAGGER" batch -q --db "$TMP/$name.db" "$TMP/$name.jsonl" \
        >"$TMP/$name.out" 2>"$TMP/$name.berr" || rc=$?
    t1=$(date +%s%N)
    stop_server
    [ "$rc" -eq 0 ] || bad "$name" "stagger batch exited $rc: $(tail -3 "$TMP/$name.berr")"
    "$STAGGER" batch report --db "$TMP/$name.db" --json >"$TMP/$name.report"
    "$PYTHON" - "$name" "$TMP/$name.report" "$TMP/$name.stats" "$TMP/$name.log" "$N" "$COST" \
        "$(((t1 - t0) / 1000000))" <<'EOF' || bad "$name" "see above"
import json, sys
name, report, stats, log, n, cost, wall_ms = sys.argv[1:8]
n, cost, wall_ms = int(n), int(cost), int(wall_ms)
rep, st = json.load(open(report)), json.load(open(stats))
log = [json.loads(l) for l in open(log)]
def need(c, what):
    if not c:
        raise SystemExit("FAIL %s: %s" % (name, what))
need(rep["states"]["done"] == n, "jobs not done: %r" % rep["states"])
e = st["early_retries"]
need(e["total"] == 0, "early retries: %r" % e)
adm = sorted(r["t_us"] for r in log if r["status"] == 200)
need(len(adm) == n, "the server admitted %d, not %d" % (len(adm), n))
worst = []
ideal = 0.0
for q in st["dialect"]["quotas"]:
    if q["limit"] == 0 or (name == "github" and q["name"] == "search"):
        continue
    L, W = q["limit"], q["window_s"] * 1e6
    unit = cost if q["unit"] == "tokens" else 1
    if q["kind"] == "bucket":
        ideal = max(ideal, (n * unit - L) / (L / (W / 1e6)) if n * unit > L else 0.0)
    else:  # the first request's window and the next ones, LIMIT each
        w0 = (st["start_wall_us"] + adm[0]) / 1e6
        ideal = max(ideal, (w0 // (W / 1e6) + -(-n * unit // L) - 1) * (W / 1e6) - w0)
    if q["kind"] == "window":
        # Wall-clock windows: t_us + start_wall_us; a request within 2 ms of
        # a boundary may be on either side and counts for both.
        per = {}
        for t in adm:
            w = st["start_wall_us"] + t
            for k in {int((w - 2000) // W), int((w + 2000) // W)}:
                per.setdefault(k, [0, 0])
            k0, k1 = int((w - 2000) // W), int((w + 2000) // W)
            if k0 == k1:
                per[k0][0] += unit
            else:
                per[k0][1] += unit
                per[k1][1] += unit
        for k, (sure, maybe) in per.items():
            need(sure <= L, "%s: window %d admitted %d > %d" % (q["name"], k, sure, L))
        worst.append("%s max %d/%d per window" % (q["name"], max(s for s, _ in per.values()), L))
    else:
        # A bucket: units admitted in [a, b] <= L + L/W * (b - a).
        m = max((j - i + 1) * unit - L / W * (adm[j] - adm[i])
                for i in range(len(adm)) for j in range(i, len(adm)))
        need(m <= L + 1e-6, "%s: bucket over-admitted by %.2f" % (q["name"], m - L))
        worst.append("%s max excess %.1f/%d" % (q["name"], m, L))
refused = sum(1 for r in log if r["status"] != 200)
print("  %-9s %d jobs done in %.2f s (ideal %.2f s, %.2fx), %d refused, 0 early (%d retries checked); %s"
      % (name, n, wall_ms / 1000.0, ideal, wall_ms / 1000.0 / ideal if ideal else 0, refused,
         e["checked"], "; ".join(worst)))
EOF
}

run ietf short=20/2s long=1200/1m
run openai requests=10/1s tokens=1000/1s
run anthropic requests=10/1s tokens=1000/1s input-tokens=1000/1s output-tokens=1000/1s
run github core=20/2s
run discord bucket=20/2s
run shopify calls=10/1s
run x requests=20/2s
run azure requests=10/1s tokens=1000/1s
run kong second=10/1s minute=1200/1m hour=72000/1h
run stripe requests=10/1s
[ -z "$BAD" ] || fail "personas that failed:$BAD"
ok "stagger batch against every persona: every job done, 0 early retries, within the quotas"

# GitHub's secondary limit (a 403 whose JSON body says so, no Retry-After)
# pauses the whole host for the 60 s GitHub asks: after 3 admitted, the
# refused job gives its 403 back (60 s is over --max-server-wait) and the
# jobs behind it are not sent at all (the pause is past their 2 s deadline)
# instead of each meeting the same 403 as an auth failure. At most one
# refusal per request in flight (-j 2).
if [ -z "${STG_DIALECTS:-}" ] || [[ " $STG_DIALECTS " == *" github "* ]]; then
    serve_start gh2 --dialect github --quota secondary=3/1h --client-by-addr \
        --stats "$TMP/gh2.stats" --log "$TMP/gh2.log"
    for i in $(seq 8); do echo "{\"id\":\"s$i\",\"url\":\"$URL/repos/o/r$i\"}"; done >"$TMP/gh2.jsonl"
    rc=0
    timeout -k 5 60 "$STAGGER" batch -q -j 2 --deadline 2s --db "$TMP/gh2.db" "$TMP/gh2.jsonl" \
        >/dev/null 2>"$TMP/gh2.err" || rc=$?
    stop_server
    [ "$rc" -ne 0 ] || fail "secondary: the batch exited 0 with refused jobs"
    "$PYTHON" - "$TMP/gh2.stats" "$TMP/gh2.log" <<'EOF' || fail "secondary: see above"
import json, sys
st = json.load(open(sys.argv[1]))
log = [json.loads(l) for l in open(sys.argv[2])]
ok = sum(1 for r in log if r["status"] == 200)
refused = sum(1 for r in log if r["status"] == 403)
assert ok == 3, "admitted %d, not the secondary limit's 3" % ok
assert 1 <= refused <= 2, "%d refusals: the pause did not hold the host" % refused
assert st["early_retries"]["total"] == 0, st["early_retries"]
print("  secondary: 3 admitted, %d refused, %d never sent, 0 early" % (refused, 8 - ok - refused))
EOF
    ok "a GitHub secondary limit (403 body) pauses the whole host"
fi
