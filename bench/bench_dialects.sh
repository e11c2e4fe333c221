#!/bin/sh
# bench_dialects.sh BUILD_DIR: a batch against every `stagger serve --dialect`
# persona (issue 15, "Proof"), by:
#   stagger batch   stagger batch --concurrency 30, no rate given: it paces on
#                   what each persona announces; token jobs declare their cost
#   curl --retry 6  bench/peers/curl/peer.sh (curl --parallel, 30 at a time)
#   naive           bench/peers/naive/naive.py (30 workers, fixed 1 s sleep)
# JOBS GET /track/KEY jobs (default 120) per run against quotas of 40 per
# 4 s (tokens: 4000 per 4 s, each request costing 50 tokens; windows of 4 s
# so that a window's reset can be further away than a naive client's 1 s
# sleep), a fresh server per run. Prints, per persona and client, the completion time (first to
# last request in the server's log) over the ideal the persona's quotas
# allow (the least time the tightest quota allows: a bucket's capacity at
# once, then its refill rate; a window's LIMIT in the first request's window
# and in each next one; goal for stagger <= 1.10x), calls per job, the
# share refused, early retries (the server's count: retries that arrived
# before the instant their refusal told) and jobs not completed. Asserts
# nothing. Only 127.0.0.1 is contacted; every client run is capped by
# timeout(1) (BENCH_DIALECT_TIMEOUT, default 60 s).
#
# Environment: BENCH_DIALECT_JOBS (120), BENCH_DIALECTS (subset of personas),
# BENCH_DIALECT_CLIENTS (subset of: stagger curl naive), BENCH_KEEP (keep the
# servers' logs and stats in the scratch folder, to look at a run's windows),
# BENCH_DIALECT_PHASE (a client starts this far into a 4 s window, e.g. 3.6:
# its first request then lands with less than 1 s of the window left).
set -eu
B=${1:?usage: bench/bench_dialects.sh BUILD_DIR}
case "$B" in /*) ;; *) B=$(pwd)/$B ;; esac
S=$B/src/cli/stagger
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
N=${BENCH_DIALECT_JOBS:-120}
TMO=${BENCH_DIALECT_TIMEOUT:-60}
DIALECTS=${BENCH_DIALECTS:-ietf openai anthropic github discord shopify x azure kong stripe}
CLIENTS=${BENCH_DIALECT_CLIENTS:-stagger curl naive}
COST=50
T=$(mktemp -d /tmp/stg_bench_dialects.XXXXXX)
SRV_PID=""
cleanup() {
    if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
    [ -n "${BENCH_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT INT TERM

# The quotas of each persona for this bench: 40 requests per 4 s (or a
# bucket of 40 refilled at 10/s), 4000 tokens per 4 s where it counts
# tokens (Kong: its second window, 10 per 1 s). Long windows (ietf long,
# Kong minute and hour) are sized not to bind, so the ideal is the short
# window's; the persona's other quotas keep their defaults (wider).
quotas() {
    case $1 in
        ietf) echo "--quota short=40/4s --quota long=1200/1m" ;;
        openai) echo "--quota requests=40/4s --quota tokens=4000/4s" ;;
        anthropic) echo "--quota requests=40/4s --quota tokens=4000/4s --quota input-tokens=4000/4s --quota output-tokens=4000/4s" ;;
        github) echo "--quota core=40/4s" ;;
        discord) echo "--quota bucket=40/4s" ;;
        shopify) echo "--quota calls=40/4s" ;;
        x | stripe) echo "--quota requests=40/4s" ;;
        azure) echo "--quota requests=40/4s --quota tokens=4000/4s" ;;
        kong) echo "--quota second=10/1s --quota minute=1200/1m --quota hour=72000/1h" ;;
    esac
}

start_server() { # NAME persona
    # shellcheck disable=SC2046
    "$S" serve --port 0 --dialect "$2" $(quotas "$2") --client-by-addr --token-cost $COST \
        --log "$T/$1.log" --stats "$T/$1.stats" >"$T/$1.srv" 2>&1 &
    SRV_PID=$!
    PORT=""
    i=0
    while [ $i -lt 200 ]; do
        PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/$1.srv" 2>/dev/null || true)
        [ -n "$PORT" ] && break
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.05
        i=$((i + 1))
    done
    [ -n "$PORT" ] || { echo "server did not start: $(cat "$T/$1.srv")" >&2; exit 1; }
}
stop_server() {
    kill "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
    SRV_PID=""
}

seq -f 'k%04g' 1 "$N" >"$T/keys.txt"
: >"$T/rows"
echo "bench_dialects: $N jobs per run, quotas 40/4s (tokens 4000/4s, $COST per job)" >&2
for d in $DIALECTS; do
    for c in $CLIENTS; do
        name=$d.$c
        echo "  running: $d $c" >&2
        start_server "$name" "$d"
        base="http://127.0.0.1:$PORT/track/"
        if [ -n "${BENCH_DIALECT_PHASE:-}" ]; then
            python3 -c 'import sys, time; p = float(sys.argv[1]); time.sleep((p - time.time() % 4.0) % 4.0)' \
                "$BENCH_DIALECT_PHASE"
        fi
        set +e
        case $c in
            stagger)
                while read -r k; do
                    printf '{"id":"%s","url":"%s%s","cost":{"tokens":%d}}\n' "$k" "$base" "$k" "$COST"
                done <"$T/keys.txt" >"$T/$name.jsonl"
                timeout -k 5 "$TMO" "$S" batch -q --db "$T/$name.db" --concurrency 30 \
                    "$T/$name.jsonl" >"$T/$name.out" 2>&1 ;;
            curl) timeout -k 5 "$TMO" sh "$ROOT/bench/peers/curl/peer.sh" "$base" "$T/keys.txt" 30 \
                      "$T/$name.files" >"$T/$name.out" 2>&1 ;;
            naive) timeout -k 5 "$TMO" python3 "$ROOT/bench/peers/naive/naive.py" "$base" \
                       "$T/keys.txt" 30 >"$T/$name.out" 2>&1 ;;
        esac
        rc=$?
        set -e
        stop_server
        rm -rf "$T/$name.files"
        python3 - "$d" "$c" "$T/$name.log" "$T/$name.stats" "$N" "$COST" "$rc" >>"$T/rows" <<'PY'
import json, sys
d, c, log, stats, n, cost, rc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
rows = [json.loads(l) for l in open(log)]
st = json.load(open(stats))
ts = [r["t_us"] for r in rows]
# The ideal: the least time from the first request to the last that the
# tightest quota allows. A bucket: its capacity at once, then its rate:
# (units - LIMIT) / (LIMIT / W). A wall-clock window: LIMIT in the window of
# the first request w0, LIMIT in each next one, so the last request can go
# at the start of window k0 + ceil(units / LIMIT) - 1.
ideal = 0.0
w0 = st["start_wall_us"] / 1e6 + (min(ts) / 1e6 if ts else 0.0)
for q in st["dialect"]["quotas"]:
    if q["limit"] == 0 or (d == "github" and q["name"] == "search"):
        continue
    units = n * (cost if q["unit"] == "tokens" else 1)
    L, W = q["limit"], q["window_s"]
    if q["kind"] == "bucket":
        t = (units - L) / (L / W) if units > L else 0.0
    else:
        t = max(0.0, (w0 // W + -(-units // L) - 1) * W - w0)
    ideal = max(ideal, t)
span = (max(ts) - min(ts)) / 1e6 if ts else 0.0
done = {r["path"] for r in rows if r["status"] == 200}
lost = n - len(done)
refused = sum(1 for r in rows if r["status"] != 200)
timed = " (timed out)" if rc in (124, 137) else ""
print("| %s | %s | %.1f%s | %.1f | %.2f | %.2f | %.1f | %d | %d |" % (
    d, {"stagger": "stagger batch", "curl": "curl --retry 6", "naive": "naive 1 s sleep"}[c],
    span, timed, ideal, span / ideal if ideal else 0.0, len(rows) / n,
    100.0 * refused / max(len(rows), 1), st["early_retries"]["total"], lost))
PY
    done
done
echo "| persona | client | completion s | ideal s | ÷ ideal | calls/job | refused % | early retries | jobs not completed |"
echo "|---|---|--:|--:|--:|--:|--:|--:|--:|"
cat "$T/rows"
