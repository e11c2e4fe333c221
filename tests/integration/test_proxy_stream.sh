#!/usr/bin/env bash
# stagger proxy, streaming: Server-Sent Events reach the client event by
# event (the upstream sends its second event only after the client has
# read the first: a proxy that buffered would deadlock, and the upstream's
# wait would time out); a chunked body stays chunked; a 64 MiB body read
# slowly streams with bounded proxy memory (the upstream is paused, not
# buffered: the peak RSS grows by far less than the body); a client that
# disconnects cancels the upstream attempt (the server sees its connection
# close) and a waiting retry (nothing more is sent, in_flight drops to 0).
# All on 127.0.0.1; every wait is a hang guard that ends at the event.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_pxs.XXXXXX)
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"
trap 'in_script && { stop_jobs; rm -rf "$T"; }' EXIT
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)


: > "$T/up.out"
$PY "$HERE/test_proxy_upstream.py" > "$T/up.out" 2>"$T/up.err" &
UPPORT=$(listen_port "$T/up.out" $!)
[ -n "$UPPORT" ] || { echo "upstream did not start" >&2; exit 1; }
UP="http://127.0.0.1:$UPPORT"
# A body this size streams with memory bounded by the proxy's buffer; the
# sanitizer's quarantine of freed blocks is not the proxy's memory.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16" proxy_start s --upstream "$UP"

# ---- SSE event by event -----------------------------------------------------------
out=$($PY - "$PX/sse?flag=$T/got1" "$T/got1" <<'EOF'
import sys, urllib.request
url, flag = sys.argv[1], sys.argv[2]
r = urllib.request.urlopen(url, timeout=60)
print("ctype", r.headers.get("Content-Type"))
print("te", r.headers.get("Transfer-Encoding"))
first = r.readline()
print("first", first.decode().strip())
open(flag, "w").close()           # only now does the upstream send event 2
rest = r.read().decode()
print("rest", " ".join(rest.split()))
EOF
)
check "SSE: content type kept ($out)" grep -q '^ctype text/event-stream' <<<"$out"
check "SSE: chunked to the client" grep -q '^te chunked' <<<"$out"
check "SSE: the first event arrived before the upstream finished" grep -q '^first data: one' <<<"$out"
check "SSE: the second after it, no upstream timeout" grep -q '^rest data: two ok' <<<"$out"

# ---- a chunked body stays chunked ---------------------------------------------------
curl -s -D "$T/ch.h" -o "$T/ch.b" "$PX/chunked"
check "chunked kept" grep -qi '^Transfer-Encoding: chunked' "$T/ch.h"
check "chunked body" [ "$(cat "$T/ch.b")" = "alpha beta gamma" ]

# ---- 64 MiB read slowly: bounded proxy memory ---------------------------------------
N=$((64 << 20))
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$PXPID/status"; }
curl -s -o /dev/null "$PX/big?n=$((4 << 20))"   # warm up the buffers once
base=$(hwm)
res=$($PY - "$PX/big?n=$N" <<'EOF'
import sys, time, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=120)
total, ok, i = 0, True, 0
while True:
    b = r.read(65536)
    if not b:
        break
    # byte k of the body is k % 251: order and offsets checked
    if b[0] != total % 251 or b[-1] != (total + len(b) - 1) % 251:
        ok = False
    total += len(b)
    i += 1
    if i % 4 == 0:
        time.sleep(0.002)          # a slow reader: the proxy must pause the upstream
print(total, ok, r.headers.get("Content-Length"))
EOF
)
peak=$(hwm)
check "64 MiB: every byte, in order ($res)" [ "$res" = "$N True $N" ]
grow=$(( (peak - base) / 1024 ))
check "64 MiB: proxy peak memory grew by $grow MiB (< 32, the body is 64)" [ "$grow" -lt 32 ]
proxy_stop

# ---- a client that leaves cancels the attempt in flight -----------------------------
stat_of() { curl -s "$URL/__stats" | $PY -c 'import json,sys; j=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
serve_start hang --hang-every 1
proxy_start c --upstream "$URL" --rate 0
curl -s -m 2 -o /dev/null "$PX/hang" &
CPID=$!
check "the attempt reached the server" wait_for sh -c "[ \"\$(curl -s '$URL/__stats' | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"faults\"][\"hangs\"])')\" = 1 ]"
check "its connection is open (the proxy's and this one)" [ "$(stat_of 'j["connections"]')" = 2 ]
wait "$CPID" || true
check "client gone: the proxy closed the upstream connection" wait_for sh -c "[ \"\$(curl -s '$URL/__stats' | $PY -c 'import json,sys; print(json.load(sys.stdin)[\"connections\"])')\" = 1 ]"
check "client gone: nothing in flight" wait_for sh -c "curl -s '$PX/__stagger/health' | grep -q '\"in_flight\":0'"
proxy_stop
serve_stop "$SRV_PID" || true

# ---- ... and a waiting retry ----------------------------------------------------------
serve_start wait
proxy_start w --upstream "$URL" --rate 0 --max-server-wait 1m --deadline 2m
curl -s -m 2 -o /dev/null "$PX/status/503?retry_after=40" &
CPID=$!
check "the retry waits in the proxy" wait_for sh -c "curl -s '$PX/__stagger/metrics' | grep -q '^stagger_retries_total.* 1$'"
wait "$CPID" || true
check "client gone: the waiting retry is cancelled" wait_for sh -c "curl -s '$PX/__stagger/health' | grep -q '\"in_flight\":0'"
m=$(curl -s "$PX/__stagger/metrics")
check "  counted as a cancelled give-up" grep -q '^stagger_give_ups_total{reason="cancelled"} 1' <<<"$m"
check "  and nothing more was sent (server total $(stat_of 'j["total"]'))" [ "$(stat_of 'j["total"]')" = 1 ]
proxy_stop
serve_stop "$SRV_PID" || true
finish
