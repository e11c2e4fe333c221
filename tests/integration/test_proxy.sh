#!/usr/bin/env bash
# stagger proxy, reverse mode, against `stagger serve` on 127.0.0.1: what
# goes upstream (hop-by-hop fields removed, Host the upstream's, Via
# added, Authorization passed, Stagger-* stripped, nothing libcurl would
# add), routes (longest prefix on a segment boundary), final answers (a
# 429 given back with the upstream's Retry-After and rate-limit fields),
# retries only when safe (with --no-retry-refusals a POST without a key
# is sent once, even on a 429; with a key or --idempotency-key auto it is
# retried and the server's idempotency log shows one effect; the default,
# a refusal retried for any method, is test_proxy_refusals.sh's), the control headers, CONNECT and forward mode,
# metrics and health, the redacted log, SIGHUP and the SIGTERM drain.
# Bounds come from the protocol (attempt counts, the server's log), never
# from how fast the machine is.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch proxy
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

stats() { curl -s "$1/__stats"; }

# ---- what goes upstream --------------------------------------------------------
serve_start up
UP=$URL; UPPORT=$PORT; UPPID=$SRV_PID
proxy_start basic --upstream "$UP" --log "$T/basic.log"
body=$(curl -s -H 'Authorization: Bearer sk-secret-123' -H 'Connection: X-Hop' \
  -H 'X-Hop: 1' -H 'Keep-Alive: timeout=5' -H 'X-Keep: yes' -H 'Stagger-Retries: 2' \
  -H 'Accept:' "$PX/echo?q=shown&token=secretvalue")
jcheck "echo path" "$body" 'j["path"] == "/echo" and j["query"] == {"q": "shown", "token": "secretvalue"}'
jcheck "Host is the upstream's" "$body" "j['headers']['Host'] == '127.0.0.1:$UPPORT'"
via=$($PY -c 'import json,sys; print(json.loads(sys.argv[1])["headers"]["Via"])' "$body")
check "Via added: this proxy's pseudonym ($via)" grep -Eqx '1\.1 stagger-[0-9a-f]{8}' <<<"$via"
jcheck "Authorization passed untouched" "$body" 'j["headers"]["Authorization"] == "Bearer sk-secret-123"'
jcheck "end-to-end header kept" "$body" 'j["headers"]["X-Keep"] == "yes"'
jcheck "hop-by-hop removed" "$body" \
  'not any(k.lower() in ("connection", "x-hop", "keep-alive") for k in j["headers"])'
jcheck "Stagger-* stripped" "$body" 'not any(k.lower().startswith("stagger-") for k in j["headers"])'
jcheck "no Accept libcurl would add" "$body" '"Accept" not in j["headers"]'
hdrs=$(curl -s -D - -o /dev/null "$PX/echo")
check "Via on the answer: the same" grep -qx "Via: $via"$'\r' <<<"$hdrs"
hl=$(curl -sI "$PX/echo" | tr -d '\r' | sed -n 's/^Content-Length: //p')
dl=$(curl -s "$UP/echo" -o /dev/null -w '%{size_download}')
check "HEAD: the upstream's Content-Length ($hl, a GET has $dl)" [ "${hl:-0}" -gt 0 ]
post=$(curl -s -X POST --data-binary 'hello body' -H 'Content-Type: text/plain' "$PX/echo")
jcheck "POST body and method" "$post" 'j["method"] == "POST" and j["body"] == "hello body"'

# Metrics and health answer without going upstream.
before=$(stats "$UP" | $PY -c 'import json,sys; print(json.load(sys.stdin)["total"])')
m=$(curl -s "$PX/__stagger/metrics")
check "metrics: the engine's names" grep -q '^stagger_attempts_total{class="2xx"} [1-9]' <<<"$m"
check "metrics: the proxy's own" grep -q '^stagger_proxy_requests_total [1-9]' <<<"$m"
# The requests above went one after another: one upstream connection
# carried them all (libcurl's cache, through the one loop thread).
opened=$(sed -n 's/^stagger_connections_opened_total //p' <<<"$m")
reused=$(sed -n 's/^stagger_connections_reused_total //p' <<<"$m")
sent=$(sed -n 's/^stagger_attempts_total{class="2xx"} //p' <<<"$m")
check "one upstream connection opened ($opened)" [ "$opened" = 1 ]
check "  and reused by every later request ($reused of $sent)" [ "$reused" = $((sent - 1)) ]
h=$(curl -s "$PX/__stagger/health")
jcheck "health" "$h" 'j["status"] == "ok" and j["in_flight"] == 0'
after=$(stats "$UP" | $PY -c 'import json,sys; print(json.load(sys.stdin)["total"])')
check "admin endpoints never go upstream ($before -> $after)" [ "$before" = "$after" ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$PX/__stagger/nope")
check "unknown admin path is 404 (got $code)" [ "$code" = 404 ]

# CONNECT is refused with a 4xx that says to use reverse mode; forward
# mode is off, so an absolute-form target is refused too.
resp=$(printf 'CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n' |
  $PY -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",'"$PXPORT"')); s.sendall(sys.stdin.buffer.read()); s.settimeout(20); d=b""
while b"\r\n\r\n" not in d or len(d) < 200:
    c=s.recv(4096)
    if not c: break
    d+=c
print(d.decode("latin1"))')
check "CONNECT gets 405" grep -q '^HTTP/1.1 405' <<<"$resp"
check "CONNECT: says to use reverse mode" grep -q 'reverse mode' <<<"$resp"
code=$(curl -s -o "$T/fwd.body" -w '%{http_code}' -x "$PX" "$UP/echo")
check "absolute-form without --forward: 400 (got $code)" [ "$code" = 400 ]
check "  ... saying --forward" grep -q -- '--forward' "$T/fwd.body"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Stagger-Deadline: soon' "$PX/echo")
check "bad Stagger-Deadline: 400 (got $code)" [ "$code" = 400 ]

# The log: engine events and proxy lines, no secret.
kill -HUP "$PXPID"
mv "$T/basic.log" "$T/basic.log.1"
kill -HUP "$PXPID"
curl -s -o /dev/null "$PX/echo?token=abc"
for _ in $(seq 600); do [ -s "$T/basic.log" ] && break; sleep 0.05; done
# Session ids and tokens in the path's matrix parameters are no more
# logged than in the query (the one list of secret names, redact.h).
curl -s -o /dev/null "$PX/echo;jsessionid=SESSIONSECRET/x;api_key=KEYSECRET;page=2"
check "matrix parameters: the request is logged" \
  wait_for grep -q '"url":"[^"]*/echo;jsessionid=REDACTED/x;api_key=REDACTED;page=2"' "$T/basic.log"
# Query values: one rule everywhere (issue #37): a secret name's value
# hidden, the rest shown (what a user needs to debug).
curl -s -o /dev/null "$PX/echo?page=2&limit=50&api_key=QUERYSECRET"
check "query: page and limit shown, api_key hidden" \
  wait_for grep -q '"url":"[^"]*/echo?page=2&limit=50&api_key=REDACTED"' "$T/basic.log"
check "SIGHUP reopens the log" grep -q '"event":"proxy"' "$T/basic.log"
check "the log has engine events" grep -q '"event":"attempt_start"' "$T/basic.log.1"
check "no secret in the log" sh -c "! grep -q 'sk-secret-123\|secretvalue\|SESSIONSECRET\|KEYSECRET\|QUERYSECRET' '$T/basic.log' '$T/basic.log.1'"
proxy_stop

# ---- routes: the longest prefix on a segment boundary -----------------------
serve_start up2
UP2=$URL; UP2PORT=$PORT
proxy_start routes --route "/a=$UP/base" --route "/a/b=$UP2" --route "/e=$UP" --upstream "$UP2/root"
b=$(curl -s "$PX/a/x?y=1"); jcheck "route /a" "$b" "j['path'] == '/base/x'"
b=$(curl -s "$PX/a/b/c"); jcheck "route /a/b wins for /a/b/c" "$b" "j['path'] == '/c'"
b=$(curl -s "$PX/ab"); jcheck "/ab is not under /a" "$b" "j['path'] == '/root/ab'"
check "route /e went to the first server" sh -c \
  "curl -s '$PX/e/echo' | grep -q '\"Host\":\"127.0.0.1:$UPPORT\"'"
check "route /a/b went to the second" sh -c \
  "curl -s '$PX/a/b/echo' | grep -q '\"Host\":\"127.0.0.1:$UP2PORT\"'"
# Dot segments are resolved before a route is chosen (RFC 3986 §5.2.4,
# %2e as well as '.'): the path that goes upstream never leaves the base
# of the route that took it (libcurl would resolve /base/../secret to
# /secret after the join).
dot() { curl -s --path-as-is "$PX$1"; }
b=$(dot /a/../secret); jcheck "/a/../secret is /secret: the default route ($b)" "$b" "j['path'] == '/root/secret'"
b=$(dot /a/%2e%2E/secret); jcheck "/a/%2e%2E/secret too" "$b" "j['path'] == '/root/secret'"
b=$(dot /a/.%2e/.%2E/secret?q=1); jcheck "/a/.%2e/.%2E/secret too" "$b" "j['path'] == '/root/secret'"
b=$(dot /a/x/./../y); jcheck "/a/x/./../y stays under /a's base" "$b" "j['path'] == '/base/y'"
b=$(dot /a/b/..); jcheck "/a/b/.. is /a/: /a's base" "$b" "j['path'] == '/base/'"
b=$(dot /a/...); jcheck "'...' is a name, not a dot segment" "$b" "j['path'] == '/base/...'"
proxy_stop

# ---- a proxy pointed at itself: 508 Loop Detected, not a loop -----------------
# Its own pseudonym in the request's Via: the second pass answers 508 and
# the first gives it back (508 is not retried): two requests in all.
LP=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
proxy_start self --listen "127.0.0.1:$LP" --upstream "http://127.0.0.1:$LP"
code=$(curl -s -m 60 -D "$T/self.h" -o "$T/self.b" -w '%{http_code}' "$PX/x" || true)
check "pointed at itself: 508 (got $code)" [ "$code" = 508 ]
check "  Stagger-Error: loop-detected" grep -qi '^Stagger-Error: loop-detected' "$T/self.h"
n=$(curl -s "$PX/__stagger/metrics" | sed -n 's/^stagger_proxy_requests_total //p')
check "  two passes, not fifty (requests before this one: $((n - 1)))" [ "$n" = 3 ]
proxy_stop
proxy_start chain --upstream "$UP"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Via: 1.1 stagger-00000000, 1.0 other' "$PX/echo")
check "another stagger's Via passes: chains of proxies work (got $code)" [ "$code" = 200 ]
proxy_stop

# ---- forward mode ------------------------------------------------------------
proxy_start fwd --forward
b=$(curl -s -x "$PX" "$UP/echo?z=1")
jcheck "forward mode: absolute-form target" "$b" "j['path'] == '/echo' and j['headers']['Host'] == '127.0.0.1:$UPPORT'"
code=$(curl -s -o /dev/null -w '%{http_connect}' -x "$PX" --proxytunnel "https://127.0.0.1:$UPPORT/" || true)
check "forward mode: https through CONNECT refused with 405 (got $code)" [ "$code" = 405 ]
proxy_stop

# ---- forward mode keeps state for at most --max-hosts hosts ---------------------
# A client of --forward picks the host: 60 of them (127.0.0.1, ports 1 to
# 60, refused) leave at most 20 hosts' state (limiter, breaker, budget,
# learned concurrency) and 20 hosts' metrics series, the least recently
# used forgotten; the engine's stats count them (health's "hosts").
proxy_start many --forward --max-hosts 20
urls=()
for i in $(seq 1 60); do urls+=("http://127.0.0.1:$i/x"); done
curl -s -m 120 -x "$PX" -H 'Stagger-Retries: 0' "${urls[@]}" > /dev/null || true
h=$(curl -s "$PX/__stagger/health")
jcheck "60 hosts seen, at most 20 kept" "$h" 'j["requests"] >= 60 and 0 < j["hosts"] <= 20'
series=$(curl -s "$PX/__stagger/metrics" | grep -c '^stagger_concurrency_limit{' || true)
check "  and at most 20 hosts' metrics series ($series)" [ "$series" -gt 0 -a "$series" -le 20 ]
b=$(curl -s -x "$PX" "$UP/echo?again=1")
jcheck "  a host seen again works afresh" "$b" "j['path'] == '/echo'"
proxy_stop
serve_stop "$SRV_PID" || true
serve_stop "$UPPID" || true

# ---- final answers: a 429 given back keeps the upstream's fields ---------------
serve_start lim --rate 1 --burst 1 --ratelimit-headers --retry-after seconds
proxy_start lim --upstream "$URL" --rate 0 --no-quotas --max-server-wait 100ms
curl -s -o /dev/null "$PX/one"
curl -s -D "$T/429.h" -o "$T/429.b" "$PX/two"
check "429 given back" grep -q '^HTTP/1.1 429' "$T/429.h"
check "  with the upstream's Retry-After" grep -qi '^Retry-After: [0-9]' "$T/429.h"
check "  and its rate-limit fields" grep -qi '^X-RateLimit-Remaining: 0' "$T/429.h"
check "  and RateLimit-Policy" grep -qi '^RateLimit-Policy:' "$T/429.h"
check "  and its body" grep -q 'rate limited' "$T/429.b"
proxy_stop
serve_stop "$SRV_PID" || true

# ---- retries only when safe ----------------------------------------------------
# --fail-first 1: each client's first request gets a 429. With
# --no-retry-refusals a 429 is retried by method, as a 503 is.
serve_start idem --fail-first 1 --fail-retry-after 1 --log "$T/idem.log"
proxy_start idem --upstream "$URL" --rate 0 --base 10ms --no-retry-refusals
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d 'a' -H 'X-Client-Id: nokey' "$PX/echo")
check "POST without a key: not retried, the 429 comes back (got $code)" [ "$code" = 429 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d 'a' -H 'X-Client-Id: key' \
  -H 'Idempotency-Key: k-1' "$PX/echo")
check "POST with a key: retried to 200 (got $code)" [ "$code" = 200 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d 'a' -H 'X-Client-Id: key' \
  -H 'Idempotency-Key: k-1' "$PX/echo")
check "the same key again: 200 (got $code)" [ "$code" = 200 ]
st=$(stats "$URL")
jcheck "one effect for the key (a replay, no duplicate)" "$st" \
  'j["idempotent_replays"] == 1 and j["status"]["200"] == 2 and j["status"]["429"] == 2'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d 'a' -H 'X-Client-Id: ctl' \
  -H 'Idempotency-Key: k-2' -H 'Stagger-Retries: 0' "$PX/echo")
check "Stagger-Retries: 0: one attempt, the 429 (got $code)" [ "$code" = 429 ]
proxy_stop
# A body over --max-request-body streams once: sent whole, never resent
# (even with a key), whether its length is known or it comes chunked.
head -c 300000 /dev/zero | tr '\0' a > "$T/big.bin"
blen() { $PY -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["body_length"], j["body"] == "a" * 300000)' "$1"; }
proxy_start stream --upstream "$URL" --rate 0 --base 10ms --max-request-body 1000
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$T/big.bin" \
  -H 'X-Client-Id: big' -H 'Idempotency-Key: k-big' "$PX/echo")
check "streamed body: not resent even with a key, the 429 comes back (got $code)" [ "$code" = 429 ]
curl -s -o "$T/big.echo" -X POST --data-binary @"$T/big.bin" -H 'X-Client-Id: big' "$PX/echo"
check "streamed body: all of it reached the upstream ($(blen "$T/big.echo"))" [ "$(blen "$T/big.echo")" = "300000 True" ]
curl -s -o "$T/big.echo" -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$T/big.bin" \
  -H 'X-Client-Id: big' "$PX/echo"
check "streamed chunked body: all of it ($(blen "$T/big.echo"))" [ "$(blen "$T/big.echo")" = "300000 True" ]
b=$(curl -s -X POST --data-binary 'small' -H 'X-Client-Id: big' "$PX/echo")
jcheck "a small body is still buffered" "$b" 'j["body"] == "small"'
proxy_stop
proxy_start auto --upstream "$URL" --rate 0 --base 10ms --idempotency-key auto
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d 'a' -H 'X-Client-Id: auto' "$PX/echo")
check "--idempotency-key auto: a keyless POST is retried to 200 (got $code)" [ "$code" = 200 ]
proxy_stop
serve_stop "$SRV_PID" || true
keys=$(grep '"client":"auto"' "$T/idem.log" | sed -n 's/.*"key":"\(stagger-[0-9a-f]*\)".*/\1/p' | sort | uniq -c)
check "auto: both sends carried one generated key ($keys)" sh -c "echo '$keys' | grep -q '^ *2 stagger-[0-9a-f]\{32\}$'"

# ---- Stagger-Deadline and Stagger-Priority ------------------------------------------
serve_start ctl --log "$T/ctl.log"
proxy_start ctl --upstream "$URL" -j 1 --rate 2 --burst 1 --max-server-wait 1m
# A 30 s hint does not fit a 1 s deadline: the 503 comes back at once
# (without the header, the 60 s default deadline would wait and resend).
code=$(curl -s -m 20 -o /dev/null -w '%{http_code}' -H 'Stagger-Deadline: 1s' \
  "$PX/status/503?retry_after=30" || true)
check "Stagger-Deadline: 1s: the 503 given back (got $code)" [ "$code" = 503 ]
# Low priority waits behind normal: with one slot, four low requests queue
# up; three normal ones sent while the first low one is out go before the
# low ones still queued.
for i in 1 2 3 4; do curl -s -o /dev/null -H 'Stagger-Priority: low' "$PX/low$i" & done
for _ in $(seq 600); do
  curl -s "$URL/__stats" | grep -q '"total":[2-9]' && break
  sleep 0.05
done
for i in 1 2 3; do curl -s -o /dev/null "$PX/normal$i" & done
wait $(jobs -rp | grep -v -e "^$PXPID\$" -e "^$SRV_PID\$") 2>/dev/null || true
# All 8 at the server (the 503, four low, three normal); it waited for 9,
# which never came, so every run sat out the 30 s hang guard.
for _ in $(seq 600); do
  [ "$(curl -s "$URL/__stats" | $PY -c 'import json,sys; print(json.load(sys.stdin)["total"])')" -ge 8 ] && break
  sleep 0.05
done
serve_stop "$SRV_PID" || true
check "Stagger-Deadline: sent once" [ "$(grep -c '/status/503' "$T/ctl.log")" = 1 ]
order=$($PY -c 'import json,sys; print(" ".join(json.loads(l)["path"][1:] for l in open(sys.argv[1]) if "/low" in l or "/normal" in l))' "$T/ctl.log")
last_two=$(echo "$order" | awk '{print $(NF-1), $NF}')
check "Stagger-Priority: low: the last sent are low ($order)" sh -c "echo '$last_two' | grep -q '^low[0-9] low[0-9]$'"
proxy_stop

# ---- SIGTERM drains: the request in flight finishes, then exit 0 --------------
serve_start slow --slow-body-every 1 --slow-body-ms 1500
proxy_start drain --upstream "$URL" --drain 20s
curl -s -o "$T/drain.body" -w '%{http_code}' "$PX/slow" > "$T/drain.code" &
CPID=$!
# wait until the proxy has it in flight (a hang guard, not a bound)
for _ in $(seq 600); do
  curl -s "$PX/__stagger/health" | grep -q '"in_flight":1' && break
  sleep 0.05
done
kill -TERM "$PXPID"
rc=0; wait "$PXPID" || rc=$?
wait "$CPID" || true
check "drain: exit 0 (got $rc)" [ "$rc" = 0 ]
check "drain: the request in flight got its answer ($(cat "$T/drain.code"))" [ "$(cat "$T/drain.code")" = 200 ]
jcheck "drain: the whole body" "$(cat "$T/drain.body")" 'j["path"] == "/slow"'
serve_stop "$SRV_PID" || true

# ---- listen address ---------------------------------------------------------------
expect_exit "no upstream is bad usage" 2 "$S" proxy --listen 127.0.0.1:0
expect_exit "a non-loopback address needs --allow-remote" 2 "$S" proxy --listen 0.0.0.0:0 --upstream "$UP"
finish
