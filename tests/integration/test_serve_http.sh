#!/usr/bin/env bash
# stagger serve: command line, endpoints, idempotency, malformed input, the
# request log, /__stats and a prompt clean stop. Real clients (curl, python
# sockets) against a server on 127.0.0.1 only.
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
jget() { "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"; }

# --- command line ------------------------------------------------------------
"$STAGGER" serve --help >"$TMP/help"
for flag in --bind --port --threads --rate --burst --limit-status --retry-after \
    --ratelimit-headers --fail-first --fail-retry-after --outage --reset-prob \
    --reset-every --hang-prob --hang-every --slow-body-prob --slow-body-every \
    --slow-body-ms --seed --log --log-format --stats --max-body; do
    grep -q -- "$flag" "$TMP/help" || fail "--help does not document $flag"
done
ok "--help documents every flag"

for bad in "--rate -1" "--rate abc" "--burst 5" "--limit-status 404" "--retry-after soon" \
    "--outage 5s" "--outage 5s+0s" "--port 70000" "--reset-prob 1.5" "--log-format xml" \
    "--ratelimit-headers" "--bogus" "--seed" "--bind not-an-address"; do
    rc=0
    # shellcheck disable=SC2086
    timeout 5 "$STAGGER" serve --port 0 $bad >"$TMP/bad.out" 2>"$TMP/bad.err" </dev/null || rc=$?
    if [ "$bad" = "--bind not-an-address" ]; then
        [ "$rc" -eq 1 ] || fail "'$bad' exited $rc, expected 1"
    else
        [ "$rc" -eq 2 ] || fail "'$bad' exited $rc, expected 2"
    fi
    [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] || fail "'$bad' printed $(wc -l <"$TMP/bad.err") lines"
    [ ! -s "$TMP/bad.out" ] || fail "'$bad' printed on stdout"
done
ok "bad flag values: one line, exit 2"

# --- endpoints ------------------------------------------------------------------
t0=$(date +%s%N)
start_server http --log "$TMP/http.log" --stats "$TMP/http.stats" --max-body 1000
t1=$(date +%s%N)
[ $(((t1 - t0) / 1000000)) -lt 1500 ] || fail "startup took $(((t1 - t0) / 1000000)) ms"
ok "listening line after $(((t1 - t0) / 1000000)) ms"
SENT=0
curl -s -o "$TMP/st" "$URL/__stats"
[ "$(jget "$TMP/st" 'd["total"], d["max_in_1s"], d["per_second"]')" = "(0, 0, [0])" ] ||
    fail "stats before any request: $(cat "$TMP/st")"

code=$(curl -s -o "$TMP/b" -w '%{http_code}' "$URL/status/404")
SENT=$((SENT + 1))
[ "$code" = 404 ] || fail "/status/404 gave $code"
[ "$(jget "$TMP/b" 'd["status"]')" = 404 ] || fail "/status/404 body $(cat "$TMP/b")"
for c in 200 201 418 429 500 503 599; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/status/$c")
    SENT=$((SENT + 1))
    [ "$code" = "$c" ] || fail "/status/$c gave $code"
done
for c in 600 99 abc 4040 ""; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/status/$c")
    SENT=$((SENT + 1))
    [ "$code" = 400 ] || fail "/status/$c gave $code, expected 400"
done
code=$(curl -s -o /dev/null -D "$TMP/h" -w '%{http_code}' "$URL/status/503?retry_after=7")
SENT=$((SENT + 1))
grep -qi '^Retry-After: 7' "$TMP/h" || fail "/status/503?retry_after=7 headers: $(cat "$TMP/h")"
ok "/status/CODE answers 100..599, 400 otherwise, ?retry_after adds Retry-After"

curl -s -o "$TMP/b" "$URL/track/ABC123"
SENT=$((SENT + 1))
[ "$(cat "$TMP/b")" = '{"path":"/track/ABC123","ok":true}' ] || fail "default body $(cat "$TMP/b")"
ok "other paths: 200 with the path"

printf '{"order":42,"note":"caf\xc3\xa9 \\"q\\""}' >"$TMP/up"
curl -s -o "$TMP/b" -X PUT -H 'X-Test: one' -H 'Content-Type: application/json' \
    --data-binary @"$TMP/up" "$URL/echo?x=1&y=two"
SENT=$((SENT + 1))
"$PYTHON" - "$TMP/b" "$TMP/up" <<'EOF' || fail "echo round trip: $(cat "$TMP/b")"
import json, sys
d = json.load(open(sys.argv[1]))
up = open(sys.argv[2], "rb").read().decode()
assert d["method"] == "PUT", d
assert d["path"] == "/echo", d
assert d["query"] == {"x": "1", "y": "two"}, d
assert d["headers"]["X-Test"] == "one", d
assert d["body"] == up and d["body_length"] == len(up.encode()), d
assert json.loads(d["body"])["order"] == 42
EOF
printf '\xff\x00\xfe' >"$TMP/bin"
curl -s -o "$TMP/b" -X POST --data-binary @"$TMP/bin" "$URL/echo"
SENT=$((SENT + 1))
[ "$(jget "$TMP/b" 'd["body_base64"]')" = "/wD+" ] || fail "binary echo $(cat "$TMP/b")"
head -c 5000 /dev/zero | tr '\0' a >"$TMP/big"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$TMP/big" "$URL/echo")
SENT=$((SENT + 1))
[ "$code" = 413 ] || fail "5000-byte body with --max-body 1000 gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Transfer-Encoding: chunked' \
    --data-binary @"$TMP/big" "$URL/echo")
SENT=$((SENT + 1))
[ "$code" = 413 ] || fail "chunked 5000-byte body gave $code"
ok "/echo round trip (text and binary), 413 over --max-body"

# --- idempotency --------------------------------------------------------------
for i in 1 2; do
    curl -s -o "$TMP/idem$i" -D "$TMP/idemh$i" -X POST -H 'Idempotency-Key: order-1' \
        -H 'X-Client-Id: shop' --data-binary '{"sku":"A"}' "$URL/echo"
    SENT=$((SENT + 1))
done
cmp -s "$TMP/idem1" "$TMP/idem2" || fail "replayed body differs"
grep -qi '^Idempotent-Replayed: true' "$TMP/idemh2" || fail "no Idempotent-Replayed header"
grep -qi '^Idempotent-Replayed' "$TMP/idemh1" && fail "first answer marked replayed"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Idempotency-Key: order-1' \
    --data-binary '{"sku":"B"}' "$URL/echo")
SENT=$((SENT + 1))
[ "$code" = 422 ] || fail "key reused for another body gave $code"
for i in 1 2 3; do
    curl -s -o /dev/null -X POST -H 'X-Client-Id: careless' --data-binary 'pay 10' "$URL/pay"
    SENT=$((SENT + 1))
done
curl -s -o /dev/null -X PATCH -H 'X-Client-Id: careless' --data-binary 'pay 11' "$URL/pay"
curl -s -o /dev/null -X PUT -H 'X-Client-Id: careless' --data-binary 'pay 10' "$URL/pay"
curl -s -o /dev/null -X PUT -H 'X-Client-Id: careless' --data-binary 'pay 10' "$URL/pay"
SENT=$((SENT + 3))
curl -s -o "$TMP/st" "$URL/__stats"
[ "$(jget "$TMP/st" 'd["duplicates_without_key"]')" = 2 ] || fail "duplicates_without_key: $(cat "$TMP/st")"
[ "$(jget "$TMP/st" 'd["idempotent_replays"]')" = 1 ] || fail "idempotent_replays: $(cat "$TMP/st")"
ok "Idempotency-Key replays the first answer; 422 on reuse; keyless repeats counted"

# --- malformed requests ---------------------------------------------------------
"$PYTHON" - "$PORT" <<'EOF' || fail "malformed requests"
import socket, sys
port = int(sys.argv[1])
def status(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    out = b""
    while b"\r\n" not in out:
        b = s.recv(4096)
        if not b:
            break
        out += b
    s.close()
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
cases = {
    "bad version": b"GET / FOO\r\nHost: x\r\n\r\n",
    "empty target": b"GET  HTTP/1.1\r\nHost: x\r\n\r\n",
    "control bytes in method": b"\x00\x01\x02 / HTTP/1.1\r\nHost: x\r\n\r\n",
    "header without colon": b"GET / HTTP/1.1\r\nHost x\r\n\r\n",
    "bad content-length": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "64 KiB header": b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n",
    "5000 headers": b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(5000)) + b"\r\n",
}
for name, data in cases.items():
    st = status(data)
    assert st is not None and 400 <= st < 500, (name, st)
    print("  %s -> %d" % (name, st))
EOF
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/still/alive")
SENT=$((SENT + 1))
# A client that leaves halfway through its body: counted and logged "aborted".
"$PYTHON" - "$PORT" <<'EOF' || fail "aborted upload"
import json, socket, sys, time, http.client
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
time.sleep(0.1)
s.close()
for _ in range(50):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/__stats")
    if json.loads(c.getresponse().read())["aborted"] == 1:
        break
    time.sleep(0.05)
else:
    raise SystemExit("aborted upload not counted")
EOF
SENT=$((SENT + 1))
[ "$code" = 200 ] || fail "server stopped serving after malformed input ($code)"
ok "malformed request lines and huge headers get 4xx; the server keeps serving"

# --- stats, log, stop -------------------------------------------------------------
curl -s -o "$TMP/st" "$URL/__stats"
"$PYTHON" - "$TMP/st" "$SENT" <<'EOF' || fail "stats: $(cat "$TMP/st")"
import json, sys
d = json.load(open(sys.argv[1])); sent = int(sys.argv[2])
assert d["total"] == sent, (d["total"], sent)
assert sum(d["per_second"]) == sent
assert sum(d["status"].values()) == sent - 1          # one aborted upload
assert d["admitted"] == sent - 1 and d["aborted"] == 1
assert d["limited"] == 0 and d["limit"] is None
assert d["status"]["404"] == 1 and d["status"]["413"] == 2 and d["status"]["422"] == 1
assert 1 <= d["max_in_10ms"] <= d["max_in_1s"] <= sent
EOF
ok "/__stats counts $SENT client requests, one aborted (itself and malformed ones excluded)"

stop_server
"$PYTHON" - "$TMP/http.log" "$TMP/http.stats" "$SENT" <<'EOF' || fail "log/stats file"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
sent = int(sys.argv[3])
assert len(lines) == sent, (len(lines), sent)
recs = [json.loads(l) for l in lines]
assert all(set(r) == {"t_us", "client", "method", "path", "status", "key"} for r in recs)
assert recs[0]["path"] == "/status/404" and recs[0]["status"] == 404
assert any(r["key"] == "order-1" and r["client"] == "shop" for r in recs)
assert all(r["client"] == r["path"] for r in recs if r["path"].startswith("/status/"))
assert [r["path"] for r in recs if r["status"] == "aborted"] == ["/upload"]
ts = [r["t_us"] for r in recs]
assert ts == sorted(ts), "sequential requests logged out of order"
st = json.load(open(sys.argv[2]))
assert st["total"] == sent, st
EOF
ok "log: one JSON line per request; stats file written at exit"

start_server csv --log "$TMP/c.log" --log-format csv
curl -s -o /dev/null -H 'X-Client-Id: a,b' -H 'Idempotency-Key: k"1' -X POST -d x "$URL/p"
curl -s -o /dev/null "$URL/q"
stop_server INT
"$PYTHON" - "$TMP/c.log" <<'EOF' || fail "csv log: $(cat "$TMP/c.log")"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == ["arrival_us", "client", "method", "path", "status", "idempotency_key"], rows
assert rows[1][1:] == ["a,b", "POST", "/p", "200", 'k"1'], rows
assert rows[2][1:] == ["/q", "GET", "/q", "200", ""], rows
assert len(rows) == 3
EOF
ok "csv log: header line plus one quoted row per request; SIGINT exits 0"
