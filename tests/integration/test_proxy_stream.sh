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
scratch pxs
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
HERE=$(cd "$(dirname "$0")" && pwd)


py_upstream test_proxy_upstream.py
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

# ---- non-2xx bodies reach the client whole ------------------------------------------
# 1 MiB, byte i being i % 251, as the upstream sent it: a 429 given back at
# once (its Retry-After is beyond --max-server-wait: it arrived while a
# retry was still possible), a final 500 (no retry left), chunked or not,
# and a 500 that replaced a 503 whose retry followed (nothing of the 503's
# "xxx" body spliced in).
MIB=$((1 << 20))
$PY -c 'import sys; n=int(sys.argv[1]); sys.stdout.buffer.write((bytes(range(251)) * (n // 251 + 1))[:n])' \
  $MIB > "$T/want.1m"
body_check() { # NAME WANT_CODE URL [CURL ARGS...]
  _bn=$1 _bc=$2 _bu=$3; shift 3
  code=$(curl -s -m 60 -D "$T/$_bn.h" -o "$T/$_bn.b" -w '%{http_code}' "$@" "$_bu" || true)
  check "$_bn: status $_bc (got $code)" [ "$code" = "$_bc" ]
  check "$_bn: the 1 MiB body byte for byte ($(wc -c < "$T/$_bn.b") bytes)" cmp -s "$T/want.1m" "$T/$_bn.b"
}
body_check "429 given back" 429 "$PX/status?code=429&n=$MIB&retry_after=3600"
check "  its Retry-After unchanged" grep -qi '^Retry-After: 3600' "$T/429 given back.h"
body_check "final 500" 500 "$PX/status?code=500&n=$MIB" -H 'Stagger-Retries: 0'
body_check "final 500, chunked" 500 "$PX/status?code=500&n=$MIB&chunked=1" -H 'Stagger-Retries: 0'
body_check "500 after a retried 503" 500 "$PX/flaky?key=a&n=$MIB" -H 'Stagger-Retries: 1'

# Past --max-body a 500 is a 502 that says so, never a cut 500.
proxy_stop
proxy_start mb --upstream "$UP" --max-body 524288
code=$(curl -s -m 60 -D "$T/mb.h" -o "$T/mb.b" -w '%{http_code}' -H 'Stagger-Retries: 0' \
  "$PX/status?code=500&n=$MIB" || true)
check "over --max-body: 502, not a cut 500 (got $code)" [ "$code" = 502 ]
check "  with a Stagger-Error" grep -qi '^Stagger-Error: body-too-large' "$T/mb.h"

# All the bodies held at once obey --max-spool: a client that does not
# read its 32 MiB 500 keeps it held (socket buffers take a few MiB of it);
# a second 32 MiB one would pass 40 MB: a 502 that says so; a 1 MiB one
# still fits beside it.
proxy_stop
proxy_start sp --upstream "$UP" --max-spool 40000000 -j 4
$PY - "$PXPORT" "$T/held" "$T/let-go" <<'EOF' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /status?code=500&n=33554432 HTTP/1.1\r\nHost: x\r\nStagger-Retries: 0\r\n\r\n")
s.recv(1)                       # the answer has begun: the proxy holds its body
open(sys.argv[2], "w").close()
for _ in range(600):            # a hang guard; the test lets go
    if os.path.exists(sys.argv[3]):
        break
    time.sleep(0.05)
s.close()
EOF
HELD=$!
check "a 32 MiB 500 is held for a client that does not read" wait_for test -e "$T/held"
code=$(curl -s -m 60 -D "$T/sp.h" -o "$T/sp.b" -w '%{http_code}' -H 'Stagger-Retries: 0' \
  "$PX/status?code=500&n=$((32 << 20))" || true)
check "  a second 32 MiB one passes --max-spool: 502 (got $code)" [ "$code" = 502 ]
check "  Stagger-Error: body-too-large" grep -qi '^Stagger-Error: body-too-large' "$T/sp.h"
check "  the body says --max-spool" grep -q 'max-spool' "$T/sp.b"
code=$(curl -s -m 60 -o /dev/null -w '%{http_code}' -H 'Stagger-Retries: 0' \
  "$PX/status?code=500&n=$MIB" || true)
check "  a 1 MiB one still fits beside it: 500 (got $code)" [ "$code" = 500 ]
touch "$T/let-go"
wait "$HELD"

# ---- redirects come back through the proxy ---------------------------------------------
# A Location on a routed upstream names the proxy and the route's prefix
# (an absolute one, and a relative one resolved against the upstream URL);
# one on another origin is passed unchanged. curl -L then lands through
# the proxy.
proxy_stop
proxy_start r --upstream "$UP" --route "/api=$UP/v2"
loc() { curl -s -o /dev/null -w '%{redirect_url}' -G --data-urlencode "to=$2" "$PX$1"; }
rawloc() { curl -s -D - -o /dev/null -G --data-urlencode "to=$2" "$PX$1" | tr -d '\r' | sed -n 's/^Location: //Ip'; }
got=$(rawloc /redirect '{self}/landed?x=1')
check "Location on the upstream: to the proxy ($got)" [ "$got" = "$PX/landed?x=1" ]
got=$(rawloc /api/redirect '{self}/v2/landed')
check "Location under a route's base: its prefix ($got)" [ "$got" = "$PX/api/landed" ]
got=$(rawloc /api/redirect 'landed#top')
check "relative Location: resolved on the upstream, then to the proxy ($got)" [ "$got" = "$PX/api/landed#top" ]
got=$(rawloc /api/redirect '/elsewhere')
check "relative Location under the default route ($got)" [ "$got" = "$PX/elsewhere" ]
got=$(rawloc /redirect "http://localhost:$UPPORT/landed")
check "Location on another origin: unchanged ($got)" [ "$got" = "http://localhost:$UPPORT/landed" ]
got=$(rawloc /redirect 'https://example.com/x')
check "Location elsewhere: unchanged ($got)" [ "$got" = "https://example.com/x" ]
out=$(curl -s -L -G --data-urlencode 'to={self}/v2/landed' "$PX/api/redirect")
check "curl -L follows it through the proxy ($out)" [ "$out" = landed ]
proxy_stop
proxy_start r2 --route "/api=$UP/v2"
got=$(rawloc /api/redirect '/elsewhere')
check "relative Location outside every route: the upstream's absolute URL ($got)" [ "$got" = "$UP/elsewhere" ]
proxy_stop
ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16" proxy_start s --upstream "$UP"

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
# A 32 MiB 500 is kept whole until it is known to be the answer, on disk
# past the first 64 KiB: every byte reaches the client, memory stays flat.
base=$(hwm)
res=$(curl -s -H 'Stagger-Retries: 0' -o "$T/big500.b" -w '%{http_code} %{size_download}' \
  "$PX/status?code=500&n=$((32 << 20))")
check "32 MiB 500: every byte ($res)" [ "$res" = "500 $((32 << 20))" ]
check "32 MiB 500: in order" $PY -c 'import sys
d = open(sys.argv[1], "rb").read()
sys.exit(0 if d == (bytes(range(251)) * (len(d) // 251 + 1))[:len(d)] else 1)' "$T/big500.b"
grow=$(( ($(hwm) - base) / 1024 ))
check "32 MiB 500: proxy peak memory grew by $grow MiB (< 16)" [ "$grow" -lt 16 ]
# One past the default --max-body (64 MiB): a 502 that says so, not a
# spool that grows as far as the upstream (or a --forward client) likes.
res=$(curl -s -H 'Stagger-Retries: 0' -D "$T/big502.h" -o "$T/big502.b" -w '%{http_code}' \
  "$PX/status?code=500&n=$(((64 << 20) + 1))" || true)
check "64 MiB + 1 500: 502 (got $res)" [ "$res" = 502 ]
check "  Stagger-Error: body-too-large" grep -qi '^Stagger-Error: body-too-large' "$T/big502.h"
check "  the body says why" grep -q 'max-body' "$T/big502.b"
proxy_stop

# ---- buffered request bodies: one budget for all requests --------------------------
# --max-request-buffer 1000000: while a request in flight holds a 600 kB
# body, a second one does not fit and streams: sent once, so the
# upstream's 503 comes back instead of a retry. Once the first is over,
# the same request is buffered again, retried, and gets its 200. (The
# second is released with the first: the host's first send is a quota
# probe, and the next one waits for its answer, include/stagger/quota.h.)
head -c 600000 /dev/zero > "$T/600k"
proxy_start ub --upstream "$UP" --max-request-buffer 1000000 -j 4 --rate 0
curl -s -m 60 -o "$T/hold.b" --data-binary @"$T/600k" "$PX/hold?flag=$T/release" &
HOLD=$!
check "the first body is in flight" wait_for sh -c "curl -s '$PX/__stagger/health' | grep -q '\"in_flight\":1'"
curl -s -m 60 -o "$T/b.b" -w '%{http_code}' -H 'Idempotency-Key: b1' \
  --data-binary @"$T/600k" "$PX/once503?key=b" > "$T/b.code" &
SECOND=$!
check "the second is in too" wait_for sh -c "curl -s '$PX/__stagger/health' | grep -q '\"in_flight\":2'"
touch "$T/release"
wait "$HOLD" "$SECOND"
check "a second body past the budget streams, sent once: the 503 (got $(cat "$T/b.code"))" \
  [ "$(cat "$T/b.code")" = 503 ]
check "  the first one: buffered, answered ($(cat "$T/hold.b"))" [ "$(cat "$T/hold.b")" = "held 600000" ]
code=$(curl -s -m 60 -o "$T/c.b" -w '%{http_code}' -H 'Idempotency-Key: c1' \
  --data-binary @"$T/600k" "$PX/once503?key=c")
check "with room again a body is buffered and retried: 200 (got $code, $(cat "$T/c.b"))" \
  [ "$code $(cat "$T/c.b")" = "200 got 600000" ]
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
