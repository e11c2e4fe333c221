#!/bin/sh
# bench_ai.sh BUILD_DIR: an unchanged LLM SDK program against `stagger serve`'s
# LLM personas (issue 31, "Proof"), by way of:
#   proxy         `stagger proxy`, the SDK's own retries off (maxRetries 0)
#   2 replicas    two `stagger proxy` through one redis-server (--limiter),
#                 the calls split between two SDK programs, one per replica
#   portkey       the Portkey AI gateway (npm @portkey-ai/gateway, pinned in
#                 tests/ai), retry 5 on 429/503/529 honouring Retry-After,
#                 the SDK's own retries off
#   sdk retries   the SDK alone, its own retries (maxRetries 5)
#   direct        the SDK alone, no retries
# The program (tests/ai/sdk_client.mjs) makes CALLS calls, 12 at a time.
# Personas: OpenAI with a tokens-per-minute quota (3000 per 3 s; each call
# asks ~100 prompt tokens + 100 max_tokens, counted at arrival as OpenAI
# counts them), and Anthropic overloaded (529 overloaded_error at 10%,
# streams failing at their first event at 10%; the proxy's calls also
# streamed).
# Prints per persona and client: the time from the first request to the
# last in the server's log over the ideal the token quota allows for all
# the calls (its capacity at once, then its rate; a client whose calls
# failed early can show less), the share of calls the server refused
# (429/529/503 and failed streams over all it answered), and the calls that
# failed in the program. Asserts nothing. 127.0.0.1 only; each program run
# is capped by timeout(1) (BENCH_AI_TIMEOUT, default 300 s).
#
# Environment: BENCH_AI_CALLS (60), BENCH_AI_CLIENTS (subset of: proxy
# replicas portkey sdk direct), BENCH_AI_PERSONAS (openai anthropic).
set -eu
B=${1:?usage: bench/bench_ai.sh BUILD_DIR}
case "$B" in /*) ;; *) B=$(pwd)/$B ;; esac
S=$B/src/cli/stagger
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
N=${BENCH_AI_CALLS:-60}
TMO=${BENCH_AI_TIMEOUT:-300}
CLIENTS=${BENCH_AI_CLIENTS:-proxy replicas portkey sdk direct}
PERSONAS=${BENCH_AI_PERSONAS:-openai anthropic}
CONC=12
LIMIT=3000
WINDOW=3
NPM=$B/npm-ai
T=$(mktemp -d /tmp/stg_bench_ai.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

command -v node >/dev/null 2>&1 || { echo "bench_ai: node not installed: skipped" >&2; exit 0; }
sh "$ROOT/tests/ai/install.sh" "$NPM" || { echo "bench_ai: the SDKs could not be installed: skipped" >&2; exit 0; }
cp "$ROOT/tests/ai/sdk_client.mjs" "$NPM/"

port_of() { # FILE PID: the port of a "listening on http://127.0.0.1:PORT" first line
    i=0
    while [ $i -lt 200 ]; do
        p=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$1" 2>/dev/null | head -1)
        [ -n "$p" ] && { echo "$p"; return 0; }
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # PORT
    i=0
    while [ $i -lt 300 ]; do
        python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),0.2).close()' "$1" \
            2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
start() { # NAME ARGS...: a background process of this run, output in $T/NAME.out
    name=$1; shift
    "$@" >"$T/$name.out" 2>&1 &
    LAST=$!
    PIDS="$PIDS $LAST"
}
stop() { # PID
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
persona_args() {
    case $1 in
        openai) echo "--dialect openai --quota requests=100000/1m --quota tokens=$LIMIT/${WINDOW}s" ;;
        anthropic) echo "--dialect anthropic --quota requests=100000/1m --quota tokens=10000000/1m" \
            "--quota input-tokens=10000000/1m --quota output-tokens=10000000/1m" \
            "--overload-prob 0.1 --stream-error-prob 0.1 --seed 7" ;;
    esac
}
sdk() { # OUT BASE [ARGS...]: one program run
    out=$1 base=$2; shift 2
    (cd "$NPM" && timeout -k 5 "$TMO" node sdk_client.mjs --base "$base" --concurrency $CONC \
        --prompt-chars 400 --max-tokens 100 "$@") >"$out" 2>&1 || true
}

: >"$T/rows"
echo "bench_ai: $N calls, $CONC at a time; openai tokens $LIMIT/${WINDOW}s" >&2
for persona in $PERSONAS; do
    vendor=$persona
    extra=""
    cl=$CLIENTS
    # Anthropic: every client's calls as they come (529 overloads), and the
    # proxy's streamed too (streams failing at their first event). The
    # Portkey gateway's Anthropic streams fail here whatever the upstream
    # says (its "immutable" TypeError on Node 20), so no streamed row for it.
    [ "$persona" = anthropic ] && case " $CLIENTS " in *" proxy "*) cl="$CLIENTS proxy-stream" ;; esac
    for c in $cl; do
        extra=""
        [ "$c" = proxy-stream ] && extra="--stream"
        echo "  running: $persona $c" >&2
        # shellcheck disable=SC2046
        start srv "$S" serve --port 0 $(persona_args "$persona") --log "$T/$persona.$c.log"
        SRV=$LAST
        SP=$(port_of "$T/srv.out" "$SRV") || { echo "server did not start" >&2; exit 1; }
        UP=http://127.0.0.1:$SP
        base=$UP
        [ "$vendor" = openai ] && base=$UP/v1
        case $c in
            proxy | proxy-stream)
                start px "$S" proxy --listen 127.0.0.1:0 --upstream "$UP"
                PX=$LAST
                PP=$(port_of "$T/px.out" "$PX")
                b=http://127.0.0.1:$PP
                [ "$vendor" = openai ] && b=$b/v1
                sdk "$T/out.1" "$b" --vendor "$vendor" --calls "$N" $extra
                stop "$PX" ;;
            replicas)
                if ! command -v redis-server >/dev/null 2>&1; then
                    echo "  (no redis-server: replicas skipped)" >&2
                    stop "$SRV"
                    continue
                fi
                RP=$(free_port)
                start redis redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no
                RS=$LAST
                wait_port "$RP"
                start px1 "$S" proxy --listen 127.0.0.1:0 --upstream "$UP" --limiter "redis://127.0.0.1:$RP/ai"
                P1=$LAST
                start px2 "$S" proxy --listen 127.0.0.1:0 --upstream "$UP" --limiter "redis://127.0.0.1:$RP/ai"
                P2=$LAST
                b1=http://127.0.0.1:$(port_of "$T/px1.out" "$P1")
                b2=http://127.0.0.1:$(port_of "$T/px2.out" "$P2")
                if [ "$vendor" = openai ]; then b1=$b1/v1; b2=$b2/v1; fi
                sdk "$T/out.1" "$b1" --vendor "$vendor" --calls $((N / 2)) $extra &
                w1=$!
                sdk "$T/out.2" "$b2" --vendor "$vendor" --calls $((N - N / 2)) $extra
                wait "$w1" || true
                stop "$P1"; stop "$P2"; stop "$RS" ;;
            portkey)
                GP=$(free_port)
                (cd "$NPM" && exec node node_modules/@portkey-ai/gateway/build/start-server.js \
                    --port="$GP" --headless) >"$T/gw.out" 2>&1 &
                GW=$!
                PIDS="$PIDS $GW"
                wait_port "$GP" || { echo "  (portkey did not start: skipped)" >&2; stop "$GW"; stop "$SRV"; continue; }
                prov=$vendor
                host=$UP/v1
                cfg=$(printf '{"provider":"%s","api_key":"sk-bench","custom_host":"%s","retry":{"attempts":5,"on_status_codes":[429,503,529],"use_retry_after_header":true}}' "$prov" "$host")
                b=http://127.0.0.1:$GP
                [ "$vendor" = openai ] && b=$b/v1
                sdk "$T/out.1" "$b" --vendor "$vendor" --calls "$N" $extra --header "x-portkey-config:$cfg"
                stop "$GW" ;;
            sdk) sdk "$T/out.1" "$base" --vendor "$vendor" --calls "$N" $extra --sdk-retries 5 ;;
            direct) sdk "$T/out.1" "$base" --vendor "$vendor" --calls "$N" $extra ;;
        esac
        stop "$SRV"
        python3 - "$persona" "$c" "$T/$persona.$c.log" "$N" "$LIMIT" "$WINDOW" "$T"/out.* >>"$T/rows" <<'PY'
import json, sys
persona, c, log, n, limit, window = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
rows = [json.loads(l) for l in open(log) if '"ai"' in l]
ok = failed = 0
first = ""
for f in sys.argv[7:]:
    try:
        j = json.loads(open(f).read().strip().splitlines()[-1])
        ok += j["ok"]
        failed += sum(j["errors"].values())
        first = first or (j["first_error"] or "")
    except Exception as e:
        failed = n - ok
        first = first or "no result (%s)" % e
ts = [r["t_us"] for r in rows]
span = (max(ts) - min(ts)) / 1e6 if ts else 0.0
refused = sum(1 for r in rows if r["ai"] in ("refused", "overloaded", "stream_error"))
if persona == "openai":
    # The same ideal for every client: all n calls' tokens (what one call
    # asks, prompt + max_tokens, times n), the quota's capacity at once,
    # then its rate.
    per = sorted(r["tokens_in"] + r["tokens_max_out"] for r in rows)
    units = n * per[len(per) // 2] if per else 0
    ideal = max(0.0, (units - limit) / (limit / window))
    ratio = "%.2f" % (span / ideal) if ideal > 0 else "–"
    ideal_s = "%.1f" % ideal
else:
    ratio, ideal_s = "–", "–"
name = {"proxy": "stagger proxy", "proxy-stream": "stagger proxy, streamed", "replicas": "2 stagger proxy replicas (Redis)",
        "portkey": "Portkey gateway (retry 5)", "sdk": "SDK alone (maxRetries 5)",
        "direct": "SDK direct (no retries)"}[c]
if failed:
    print("    %s %s: %d failed in the program, the first: %s" % (persona, c, failed, first), file=sys.stderr)
print("| %s | %s | %.1f | %s | %s | %.1f | %d | %d |" % (
    persona, name, span, ideal_s, ratio, 100.0 * refused / max(len(rows), 1), failed, len(rows)))
PY
        rm -f "$T"/out.*
    done
done
echo "| persona | client | first to last s | ideal s | ÷ ideal | refused at server % | calls failed in the program | requests the server saw |"
echo "|---|---|--:|--:|--:|--:|--:|--:|"
cat "$T/rows"
