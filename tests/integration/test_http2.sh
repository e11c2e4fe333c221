# HTTP/2 against a real server from Debian: nghttpd (nghttp2-server) on
# 127.0.0.1 over TLS (h2 by ALPN), started here and stopped by PID. The
# requests of a batch share one connection as streams (the attempt_end
# events count the connections opened), every job is answered once, and
# with the server's SETTINGS_MAX_CONCURRENT_STREAMS at 8 the streams never
# exceed it, never one connection per job. A stream the server refused
# (RFC 9113 §8.7: a client may open more before the SETTINGS frame
# arrives, and the server answers RST_STREAM REFUSED_STREAM) was never
# processed and is sent again: it is the only failed attempt allowed, and
# the only send beyond one per job. libcurl may queue the 50 on one
# connection's 8 streams (PIPEWAIT) or open more: both keep the limit.
# Then h2c (cleartext, --http2-prior-knowledge) against nghttpd --no-tls:
# every job answered; libcurl 7.88.x breaks prior knowledge on a kept
# connection (curl #10634, fixed in 8.0.0: see xfer.c), so there each job
# has its own connection, and a later libcurl multiplexes them.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
command -v nghttpd >/dev/null || [ -x /usr/sbin/nghttpd ] ||
  skip "nghttpd not installed (apt-get install nghttp2-server): skipped"
command -v openssl >/dev/null || skip "openssl not installed: skipped"
NGHTTPD=$(command -v nghttpd || echo /usr/sbin/nghttpd)
T=$(mktemp -d /tmp/stg_h2.XXXXXX)
NG_PID=""
cleanup() {
  in_script || return 0
  [ -n "$NG_PID" ] && kill "$NG_PID" 2>/dev/null
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/k.pem" -out "$T/c.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
mkdir "$T/www"
N=200
for i in $(seq $N); do echo "body $i" >"$T/www/f$i"; done

# ng_start [ARGS]: nghttpd on a free loopback port; sets NG_PID and PORT.
# NG_TLS=no: cleartext (h2c prior knowledge only).
ng_start() {
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if [ "${NG_TLS:-yes}" = no ]; then
    set -- --no-tls "$@" "$PORT"
  else
    set -- "$@" "$PORT" "$T/k.pem" "$T/c.pem"
  fi
  "$NGHTTPD" -a 127.0.0.1 -d "$T/www" "$@" >"$T/ng.out" 2>&1 &
  NG_PID=$!
  for _ in $(seq 200); do # a hang guard, not a timing bound
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    sleep 0.05
  done
  fail "nghttpd did not start: $(cat "$T/ng.out")"
  finish
  exit 1
}
ng_stop() { kill "$NG_PID" 2>/dev/null || true; wait "$NG_PID" 2>/dev/null || true; NG_PID=""; }

# count LOG: "attempts connects errors"
count() {
  python3 - "$1" <<'PY'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '"attempt_end"' in l]
print(len(e), sum(x.get("connects", 0) for x in e),
      sum(x["outcome"] != "2xx" and not x.get("never_processed") for x in e),
      sum(bool(x.get("never_processed")) for x in e))
PY
}

ng_start
for i in $(seq $N); do echo "https://127.0.0.1:$PORT/f$i"; done >"$T/urls.txt"
expect_exit "h2: every job done" 0 "$S" batch -q --http2 -j 50 --cacert "$T/c.pem" \
  --db "$T/a.db" --log "$T/a.jsonl" "$T/urls.txt"
read -r att conn errs np <<<"$(count "$T/a.jsonl")"
check "h2: each job sent once ($att attempts)" [ "$att" = $N ]
check "h2: no failed attempt ($errs)" [ "$errs" = 0 ]
check "h2: one connection for 50 streams ($conn)" [ "$conn" = 1 ]
ng_stop

ng_start --max-concurrent-streams 8
for i in $(seq $N); do echo "https://127.0.0.1:$PORT/f$i"; done >"$T/urls.txt"
expect_exit "h2 streams 8: every job done" 0 "$S" batch -q --http2 -j 50 --cacert "$T/c.pem" \
  --db "$T/b.db" --log "$T/b.jsonl" "$T/urls.txt"
read -r att conn errs np <<<"$(count "$T/b.jsonl")"
check "h2 streams 8: each job sent once, plus the refused ($att = $N + $np)" \
  [ "$att" = $((N + np)) ]
check "h2 streams 8: no failed attempt but the refused ($errs)" [ "$errs" = 0 ]
# 50 in flight over streams of 8: more than one connection, far fewer than jobs.
check "h2 streams 8: connections within 1..50 ($conn)" [ "$conn" -ge 1 -a "$conn" -le 50 ]
ng_stop

NG_TLS=no ng_start
M=1000 # 5 times each file: enough that requests start while others' connections are up
for i in $(seq $M); do echo "http://127.0.0.1:$PORT/f$((i % N + 1))"; done >"$T/urls.txt"
expect_exit "h2c: every job done" 0 "$S" batch -q --http2-prior-knowledge -j 50 \
  --db "$T/c.db" --log "$T/c.jsonl" "$T/urls.txt"
read -r att conn errs np <<<"$(count "$T/c.jsonl")"
check "h2c: each job sent once ($att attempts)" [ "$att" = $M ]
check "h2c: no failed attempt ($errs)" [ "$errs" = 0 ]
vernum=$(curl-config --vernum 2>/dev/null || echo 0)
if [ $((16#${vernum:-0})) -ge $((16#075800)) ] && [ $((16#${vernum:-0})) -lt $((16#080000)) ]; then
  check "h2c on libcurl 7.88: a connection per job ($conn)" [ "$conn" = $M ]
else
  check "h2c: multiplexed ($conn connections)" [ "$conn" -lt $M ]
fi
ng_stop
finish
