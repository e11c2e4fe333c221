#!/bin/sh
# `make bench`: the reproducible comparison of stagger with the retry clients
# people use today (issue 9). Usage: scripts/bench.sh BUILD_DIR
#
#  1. Goodput under a limit: JOBS jobs (GET /track/KEY) against
#     `stagger serve --rate 100 --burst 20`, for stagger batch (rate given and
#     adaptive) and five peers (curl --retry, Python requests+urllib3 Retry,
#     Node got, Go go-retryablehttp, a naive fixed-1 s-sleep client), in four
#     variants: Retry-After in seconds, as a date, none, and an outage window.
#     The server's request log is the only source of the figures.
#  2. Overhead when nothing limits: requests/s beside wrk and curl --parallel,
#     and peak RSS per 1000 in-flight requests.
#  3. Primitive costs: bench_core, bench_sim, and the bench/bench_*.sh scripts
#     (bench_tls: plain HTTP beside TLS, handshakes and req/s, vs curl --parallel)
#     (bench_h2: learned vs fixed-200 concurrency against serve --capacity 20,
#     HTTP/2 vs HTTP/1.1 connections and wall time; bench_ai: the official
#     LLM SDKs through stagger proxy, two replicas, the Portkey gateway and
#     alone, against serve's OpenAI token quota and Anthropic overloads)
#     of the other parts when present.
# bench/analyze.py turns the logs into tables, docs/BENCHMARKS.md and the SVG
# charts in docs/bench/ (figures are generated, never typed in).
#
# Everything talks to 127.0.0.1 only; every client run is capped by timeout(1).
# Peers missing on the machine are installed (apt-get, npm ci) or built (Go,
# offline from Debian's Go packages); one that cannot be had is skipped and
# reported as missing.
#
# Environment:
#   BENCH_QUICK=1      300 jobs, Retry-After seconds only, short overhead runs;
#                      results stay in BUILD_DIR/bench-results (docs untouched)
#   BENCH_JOBS=N       jobs per goodput run (default 2000; quick 300)
#   BENCH_VARIANTS=".." subset of: seconds date none outage
#   BENCH_CLIENTS=".." subset of: stagger-rate stagger-adaptive curl python node go naive
#   BENCH_ALL=1        also run the naive client in the date and none variants
#                      (it ignores Retry-After, so by default it runs only in
#                      the seconds and outage variants)
#   BENCH_TIMEOUT=S    cap of one client run in seconds (default 120; quick 60)
#   BENCH_DOCS=0|1     write docs/BENCHMARKS.md and docs/bench/*.svg
#                      (default 1, quick 0)
set -eu

BUILD=${1:-build/release}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
STAGGER=$BUILD/src/cli/stagger
PEERS=$ROOT/bench/peers
OUT=$BUILD/bench-results
PY=/usr/bin/python3

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    JOBS=${BENCH_JOBS:-300}
    VARIANTS=${BENCH_VARIANTS:-seconds}
    TMO=${BENCH_TIMEOUT:-60}
    DOCS=${BENCH_DOCS:-0}
    OVER_JOBS=2000 WRK_SECS=3 RSS_CONC=300
else
    JOBS=${BENCH_JOBS:-2000}
    VARIANTS=${BENCH_VARIANTS:-seconds date none outage}
    TMO=${BENCH_TIMEOUT:-120}
    DOCS=${BENCH_DOCS:-1}
    OVER_JOBS=5000 WRK_SECS=5 RSS_CONC=1000
fi
CLIENTS=${BENCH_CLIENTS:-stagger-rate stagger-adaptive curl python node go naive}
RATE=100
BURST=20
CONC=30
NAIVE_WORKERS=50
OUTAGE=5s+5s

log() { printf 'bench: %s\n' "$*" >&2; }
now_ms() { date +%s%3N; }

if [ ! -x "$STAGGER" ]; then
    log "no stagger binary at $STAGGER (run make build)"
    exit 1
fi
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

rm -rf "$OUT"
mkdir -p "$OUT/runs" "$OUT/tmp"
: > "$OUT/manifest.jsonl"
: > "$OUT/notes.txt"
note() { printf '%s\n' "$*" >> "$OUT/notes.txt"; log "$*"; }

# ---------------------------------------------------------------- peers ----
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

install_peers() {
    missing=""
    for p in python3 python3-requests python3-urllib3 golang-go \
             golang-github-hashicorp-go-retryablehttp-dev curl wrk time; do
        have_pkg "$p" || missing="$missing $p"
    done
    command -v node >/dev/null 2>&1 || missing="$missing nodejs npm"
    if [ -n "$missing" ]; then
        log "installing$missing"
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO=sudo
        if ! { $SUDO apt-get update -qq &&
               DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
                   --no-install-recommends $missing; } >"$OUT/apt.log" 2>&1; then
            note "apt-get could not install:$missing (see $OUT/apt.log); those peers are skipped"
        fi
    fi
    if command -v node >/dev/null 2>&1 && [ ! -f "$PEERS/node/node_modules/got/package.json" ]; then
        log "npm ci in bench/peers/node"
        (cd "$PEERS/node" && npm ci --no-audit --no-fund --loglevel=error) >"$OUT/npm.log" 2>&1 ||
            note "npm ci failed (see $OUT/npm.log); the got peer is skipped"
    fi
    GOPEER=$BUILD/bench-peers/retryablehttp-peer
    if command -v go >/dev/null 2>&1 &&
       { [ ! -x "$GOPEER" ] || [ "$PEERS/go/main.go" -nt "$GOPEER" ]; }; then
        log "building the go-retryablehttp peer (offline, Debian's Go packages)"
        mkdir -p "$BUILD/bench-peers"
        gocache=$(mktemp -d)
        (cd "$PEERS/go" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$gocache \
            GOPROXY=off GOFLAGS= go build -o "$GOPEER" .) >"$OUT/go-build.log" 2>&1 ||
            note "go build failed (see $OUT/go-build.log); the go peer is skipped"
        rm -rf "$gocache"
    fi
}

# Can CLIENT run here? Prints the reason when not.
peer_ready() {
    case "$1" in
        stagger|stagger-rate|stagger-adaptive)
            "$STAGGER" batch --help >/dev/null 2>&1 || { echo "stagger batch not built"; return 1; } ;;
        curl) command -v curl >/dev/null 2>&1 || { echo "curl missing"; return 1; } ;;
        python) "$PY" -c 'import requests, urllib3' 2>/dev/null ||
                    { echo "python3-requests missing"; return 1; } ;;
        node) [ -f "$PEERS/node/node_modules/got/package.json" ] ||
                  { echo "got not installed"; return 1; }
              node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null ||
                  { echo "got 14 needs node >= 20, found $(node --version 2>/dev/null)"; return 1; } ;;
        go) [ -x "$GOPEER" ] || { echo "go peer not built"; return 1; } ;;
        naive) [ -x "$PY" ] || { echo "python3 missing"; return 1; } ;;
    esac
}

record_versions() {
    v="$OUT/versions.txt"
    : > "$v"
    echo "stagger=$("$STAGGER" --version 2>/dev/null | head -1)" >> "$v"
    echo "curl=$(curl --version 2>/dev/null | head -1)" >> "$v"
    echo "python=$("$PY" --version 2>&1)" >> "$v"
    echo "requests_urllib3=$("$PY" -c 'import requests, urllib3; print("requests", requests.__version__, "urllib3", urllib3.__version__)' 2>/dev/null || echo missing)" >> "$v"
    echo "node=$(node --version 2>/dev/null || echo missing)" >> "$v"
    echo "got=$(node -p "require('$PEERS/node/node_modules/got/package.json').version" 2>/dev/null || echo missing)" >> "$v"
    echo "go=$(go version 2>/dev/null || echo missing)" >> "$v"
    echo "retryablehttp=$(dpkg-query -W -f='${Package} ${Version}' golang-github-hashicorp-go-retryablehttp-dev 2>/dev/null || echo missing)" >> "$v"
    echo "wrk=$(wrk -v 2>&1 | head -1)" >> "$v"
    echo "curl_mode=${CURL_MODE:-parallel}" >> "$v"
}

record_machine() {
    m="$OUT/machine.txt"
    : > "$m"
    echo "nproc=$(nproc)" >> "$m"
    echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" >> "$m"
    echo "memory=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)" >> "$m"
    echo "kernel=$(uname -sr)" >> "$m"
    echo "os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")" >> "$m"
    echo "date=$(date -u +%Y-%m-%dT%H:%MZ)" >> "$m"
    echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$m"
}

# --------------------------------------------------------------- server ----
SRV_PID="" PORT=""
start_server() { # OUTFILE args...
    sout=$1
    shift
    "$STAGGER" serve --port 0 "$@" >"$sout" 2>&1 &
    SRV_PID=$!
    i=0
    while ! grep -q '^listening on' "$sout" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$SRV_PID" 2>/dev/null; then
            log "stagger serve did not start: $(cat "$sout")"
            return 1
        fi
        sleep 0.05
    done
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$sout" | head -1)
}
stop_server() {
    [ -n "$SRV_PID" ] || return 0
    kill -TERM "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
    SRV_PID=""
}
trap 'stop_server' EXIT INT TERM

# Run the command of CLIENT against BASE_URL over KEYS with CONCURRENCY.
# Writes its stdout/stderr to PREFIX.out / PREFIX.err; returns its status.
client_cmd() { # CLIENT BASE_URL KEYS CONCURRENCY PREFIX TIMEOUT [extra stagger args]
    c=$1 url=$2 keys=$3 conc=$4 pre=$5 tmo=$6
    shift 6
    set +e
    case "$c" in
        stagger-*)
            timeout -k 5 "$tmo" "$STAGGER" batch --url "${url}{}" "$keys" --db "$pre.db" \
                --concurrency "$conc" "$@" ;;
        curl)   timeout -k 5 "$tmo" sh "$PEERS/curl/peer.sh" "$url" "$keys" "$conc" "$pre.files" ;;
        python) timeout -k 5 "$tmo" "$PY" "$PEERS/python/peer.py" "$url" "$keys" "$conc" ;;
        node)   timeout -k 5 "$tmo" node "$PEERS/node/peer.mjs" "$url" "$keys" "$conc" ;;
        go)     timeout -k 5 "$tmo" "$GOPEER" "$url" "$keys" "$conc" ;;
        naive)  timeout -k 5 "$tmo" "$PY" "$PEERS/naive/naive.py" "$url" "$keys" "$conc" ;;
    esac >"$pre.out" 2>"$pre.err"
    rc=$?
    set -e
    return $rc
}

# --------------------------------------------------------- 1. goodput ----
goodput() {
    keys=$OUT/keys.txt
    seq -f 'k%05g' 1 "$JOBS" > "$keys"
    for v in $VARIANTS; do
        d=$OUT/runs/$v
        mkdir -p "$d"
        case "$v" in
            seconds|date|none) sargs="--retry-after $v" ;;
            outage) sargs="--retry-after seconds --outage $OUTAGE" ;;
            *) log "unknown variant $v"; continue ;;
        esac
        for c in $CLIENTS; do
            # The naive client never reads Retry-After: in these variants it
            # would repeat the seconds run exactly (about 90 s each).
            if [ "$c" = naive ] && { [ "$v" = date ] || [ "$v" = none ]; } &&
               [ -z "${BENCH_ALL:-}" ] && case " $VARIANTS " in *" seconds "*) true ;; *) false ;; esac; then
                printf '{"kind":"goodput","variant":"%s","client":"%s","status":"skipped","why":"%s"}\n' \
                    "$v" "$c" "it ignores Retry-After, so this run would repeat the seconds variant (BENCH_ALL=1 runs it)" \
                    >> "$OUT/manifest.jsonl"
                continue
            fi
            if ! why=$(peer_ready "$c"); then
                note "goodput $v: $c skipped ($why)"
                printf '{"kind":"goodput","variant":"%s","client":"%s","status":"missing","why":"%s"}\n' \
                    "$v" "$c" "$why" >> "$OUT/manifest.jsonl"
                continue
            fi
            conc=$CONC
            [ "$c" = naive ] && conc=$NAIVE_WORKERS
            extra=""
            [ "$c" = stagger-rate ] && extra="--rate $RATE --burst $BURST"
            # shellcheck disable=SC2086
            start_server "$d/$c.server" --rate $RATE --burst $BURST $sargs \
                --log "$d/$c.jsonl" --stats "$d/$c.stats.json"
            t0=$(now_ms)
            rc=0
            # shellcheck disable=SC2086
            client_cmd "$c" "http://127.0.0.1:$PORT/track/" "$keys" "$conc" "$d/$c" "$TMO" $extra || rc=$?
            t1=$(now_ms)
            stop_server
            case "$c" in
                stagger-*) "$STAGGER" batch report --db "$d/$c.db" >"$d/$c.report" 2>&1 || true ;;
            esac
            rm -rf "$d/$c.files"
            log "goodput $v $c: exit $rc, $((t1 - t0)) ms, $(tail -1 "$d/$c.out" 2>/dev/null)"
            printf '{"kind":"goodput","variant":"%s","client":"%s","status":"ran","exit":%d,"timeout":%s,"wall_ms":%d,"jobs":%d,"rate":%s,"burst":%d,"concurrency":%d,"server_args":"%s","log":"%s"}\n' \
                "$v" "$c" "$rc" "$([ $rc = 124 ] || [ $rc = 137 ] && echo true || echo false)" \
                "$((t1 - t0))" "$JOBS" "$RATE" "$BURST" "$conc" "$sargs" "runs/$v/$c.jsonl" \
                >> "$OUT/manifest.jsonl"
        done
    done
}

# -------------------------------------------------------- 2. overhead ----
overhead() {
    d=$OUT/overhead
    mkdir -p "$d"
    keys=$d/keys.txt
    seq -f 'o%06g' 1 "$OVER_JOBS" > "$keys"
    if command -v wrk >/dev/null 2>&1; then
        start_server "$d/wrk.server"
        set +e
        timeout -k 5 $((WRK_SECS + 30)) wrk -t2 -c$CONC -d${WRK_SECS}s \
            "http://127.0.0.1:$PORT/track/wrk" >"$d/wrk.out" 2>&1
        rc=$?
        set -e
        stop_server
        rps=$(sed -n 's/^Requests\/sec:[[:space:]]*//p' "$d/wrk.out")
        printf '{"kind":"overhead","client":"wrk","exit":%d,"rps":%s,"requests":null,"wall_ms":null}\n' \
            "$rc" "${rps:-null}" >> "$OUT/manifest.jsonl"
    else
        note "overhead: wrk missing"
    fi
    # curl --parallel: one config file, no retry (so /dev/null is fine here).
    if command -v curl >/dev/null 2>&1; then
        start_server "$d/curl.server"
        sed "s|.*|url = \"http://127.0.0.1:$PORT/track/&\"\noutput = \"/dev/null\"|" "$keys" > "$d/curl.cfg"
        t0=$(now_ms)
        set +e
        timeout -k 5 "$TMO" curl -s --parallel --parallel-max $CONC -K "$d/curl.cfg" \
            -w '%{http_code}\n' >"$d/curl.out" 2>"$d/curl.err"
        rc=$?
        set -e
        t1=$(now_ms)
        stop_server
        ok=$(grep -c '^200$' "$d/curl.out" || true)
        printf '{"kind":"overhead","client":"curl-parallel","exit":%d,"requests":%d,"ok":%d,"wall_ms":%d}\n' \
            "$rc" "$OVER_JOBS" "$ok" "$((t1 - t0))" >> "$OUT/manifest.jsonl"
    fi
    for c in stagger-adaptive stagger-rate python node go; do
        if ! why=$(peer_ready "$c"); then
            note "overhead: $c skipped ($why)"
            continue
        fi
        extra=""
        [ "$c" = stagger-rate ] && extra="--rate 0"
        start_server "$d/$c.server"
        t0=$(now_ms)
        rc=0
        # shellcheck disable=SC2086
        client_cmd "$c" "http://127.0.0.1:$PORT/track/" "$keys" "$CONC" "$d/$c" "$TMO" $extra || rc=$?
        t1=$(now_ms)
        stop_server
        printf '{"kind":"overhead","client":"%s","exit":%d,"requests":%d,"wall_ms":%d,"outfile":"overhead/%s.out"}\n' \
            "$c" "$rc" "$OVER_JOBS" "$((t1 - t0))" "$c" >> "$OUT/manifest.jsonl"
    done
}

# Peak RSS with RSS_CONC requests in flight minus that with 10 in flight:
# the server trickles every body for 2 s, so each client holds its whole
# concurrency open at once.
rss() {
    d=$OUT/rss
    mkdir -p "$d"
    if [ ! -x /usr/bin/time ]; then
        note "rss: /usr/bin/time missing"
        return 0
    fi
    for c in stagger go node python; do
        if ! why=$(peer_ready "$c"); then
            note "rss: $c skipped ($why)"
            continue
        fi
        for n in 10 "$RSS_CONC"; do
            seq -f "r${n}x%06g" 1 $((n * 2)) > "$d/keys$n.txt"
            start_server "$d/$c.$n.server" --slow-body-prob 1 --slow-body-ms 2000
            rc=0
            t0=$(now_ms)
            set +e
            case "$c" in
                stagger)
                    timeout -k 5 60 /usr/bin/time -f '%M' -o "$d/$c.$n.rss" "$STAGGER" batch \
                        --url "http://127.0.0.1:$PORT/track/{}" "$d/keys$n.txt" --db "$d/$c.$n.db" \
                        --concurrency "$n" --rate 0 ;;
                go) timeout -k 5 60 /usr/bin/time -f '%M' -o "$d/$c.$n.rss" "$GOPEER" \
                        "http://127.0.0.1:$PORT/track/" "$d/keys$n.txt" "$n" ;;
                node) timeout -k 5 60 /usr/bin/time -f '%M' -o "$d/$c.$n.rss" node \
                        "$PEERS/node/peer.mjs" "http://127.0.0.1:$PORT/track/" "$d/keys$n.txt" "$n" ;;
                python) timeout -k 5 60 /usr/bin/time -f '%M' -o "$d/$c.$n.rss" "$PY" \
                        "$PEERS/python/peer.py" "http://127.0.0.1:$PORT/track/" "$d/keys$n.txt" "$n" ;;
            esac >"$d/$c.$n.out" 2>"$d/$c.$n.err"
            rc=$?
            set -e
            t1=$(now_ms)
            stop_server
            kb=$(tail -1 "$d/$c.$n.rss" 2>/dev/null | tr -cd 0-9)
            printf '{"kind":"rss","client":"%s","inflight":%d,"exit":%d,"maxrss_kb":%s,"wall_ms":%d,"outfile":"rss/%s.%d.out"}\n' \
                "$c" "$n" "$rc" "${kb:-null}" "$((t1 - t0))" "$c" "$n" >> "$OUT/manifest.jsonl"
        done
    done
}

# ------------------------------------------------------- 3. primitives ----
primitives() {
    d=$OUT/primitives
    mkdir -p "$d"
    for b in bench_core bench_sim; do
        if [ -x "$BUILD/bench/$b" ]; then
            log "running $b"
            set +e
            timeout -k 5 300 "$BUILD/bench/$b" >"$d/$b.txt" 2>"$d/$b.err"
            rc=$?
            set -e
            printf '{"kind":"primitive","name":"%s","exit":%d,"file":"primitives/%s.txt"}\n' \
                "$b" "$rc" "$b" >> "$OUT/manifest.jsonl"
        else
            note "$b: not built ($BUILD/bench/$b missing), skipped"
            printf '{"kind":"primitive","name":"%s","status":"missing"}\n' "$b" >> "$OUT/manifest.jsonl"
        fi
    done
    [ "$QUICK" = 1 ] && return 0
    for s in bench_serve bench_batch bench_redis bench_prio bench_tls bench_dialects bench_proxy bench_profile bench_ai bench_queue bench_queue_death bench_h2 bench_mem; do
        if [ -f "$ROOT/bench/$s.sh" ]; then
            log "running bench/$s.sh"
            set +e
            interp=sh
            head -1 "$ROOT/bench/$s.sh" | grep -q bash && interp=bash
            # bench_batch's "incident" part repeats the goodput section's
            # seconds variant (same clients, server and jobs): only its
            # unlimited part (goal 1, median of 3) runs here.
            parts=${BENCH_PARTS:-}
            [ "$s" = bench_batch ] && parts=${BENCH_PARTS:-unlimited}
            BENCH_PARTS=$parts timeout -k 5 1200 "$interp" "$ROOT/bench/$s.sh" "$BUILD" >"$d/$s.txt" 2>"$d/$s.err"
            rc=$?
            set -e
            printf '{"kind":"script","name":"%s","exit":%d,"file":"primitives/%s.txt"}\n' \
                "$s" "$rc" "$s" >> "$OUT/manifest.jsonl"
        else
            note "bench/$s.sh: not present, skipped"
            printf '{"kind":"script","name":"%s","status":"missing"}\n' "$s" >> "$OUT/manifest.jsonl"
        fi
    done
}

# ------------------------------------------------ 4. issue #19's goals ----
# Rows the goodput and overhead runs do not give: the two backoff bases
# from `stagger plan` beside the single-base policy of before (goal 4).
# Goal 1 is read from bench/bench_batch.sh's unlimited part (medians of
# turns at 5000 and 50 000 keys, in the primitives below; the overhead
# section's single 5000-key run when it did not run), goal 3 from the
# goodput outage run.
goals() {
    d=$OUT/goals
    mkdir -p "$d"
    for p in default batch; do
        "$STAGGER" plan --preset "$p" --json --samples 20000 > "$d/plan-$p.json" 2>/dev/null || true
    done
    "$STAGGER" plan --base 500ms --json --samples 20000 > "$d/plan-onebase.json" 2>/dev/null || true
    printf '{"kind":"goal4","files":["goals/plan-default.json","goals/plan-batch.json","goals/plan-onebase.json"]}\n' \
        >> "$OUT/manifest.jsonl"
}

# ------------------------------------------------------------------ main ----
T_START=$(now_ms)
install_peers
record_versions
record_machine
log "goodput: $JOBS jobs, variants: $VARIANTS; clients: $CLIENTS; cap ${TMO}s per run"
goodput
log "overhead: $OVER_JOBS requests without a limit"
overhead
rss
log "goals: backoff bases"
goals
primitives
T_END=$(now_ms)
echo "total_s=$(((T_END - T_START) / 1000))" >> "$OUT/machine.txt"
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
rm -rf "$OUT/tmp"

set -- --results "$OUT" --jobs "$JOBS" --rate "$RATE" --burst "$BURST"
[ "$DOCS" = 1 ] && set -- "$@" --docs "$ROOT/docs"
[ "$QUICK" = 1 ] && set -- "$@" --quick
"$PY" "$ROOT/bench/analyze.py" "$@"
