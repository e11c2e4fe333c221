# rediss://: the shared limiter (with and without leases), the work queue
# and its report over TLS to Debian's redis-server, with a CA and server and
# client certificates made by the test (tls_certs.sh), on 127.0.0.1:
#  - the TLS Redis listens on its TLS port only (--port 0), so whatever
#    works here went over TLS;
#  - --redis-cacert (and --redis-capath) verify it; without them the system
#    store does not know the test CA: refused, exit 6, a message that says
#    the certificate did not verify, nothing sent upstream, no password;
#  - --redis-insecure works and warns;
#  - mutual TLS (tls-auth-clients yes): refused without a client
#    certificate and with one another CA signed; accepted with
#    --redis-cert/--redis-key;
#  - the --redis-* options without a rediss:// URL are a usage error.
# Skipped (77) when redis-server is not built with TLS.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch rtls
. "$(dirname "$0")/queue_lib.sh"
command -v openssl >/dev/null || skip "skipped: openssl CLI missing"
sh "$(dirname "$0")/tls_certs.sh" "$T/pki"
P=$T/pki
PW='tls-s3cret-pw'

# start_tls_redis PORT AUTHCLIENTS: redis-server on the TLS port only; RPID.
start_tls_redis() {
  redis-server --port 0 --tls-port "$1" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$T" --requirepass "$PW" \
    --tls-cert-file "$P/server.pem" --tls-key-file "$P/server.key" \
    --tls-ca-cert-file "$P/ca.pem" --tls-auth-clients "$2" >>"$T/redis_$1.out" 2>&1 &
  RPID=$!
  for _ in $(seq 1 200); do
    [ "$(redis-cli --tls --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client.key" \
          -p "$1" -a "$PW" --no-auth-warning ping 2>/dev/null)" = PONG ] && return 0
    kill -0 "$RPID" 2>/dev/null || break
    sleep 0.05
  done
  if grep -qi "not built with TLS\|tls-port.*not\|Bad directive" "$T/redis_$1.out"; then
    skip "skipped: this redis-server is not built with TLS ($(tail -n 2 "$T/redis_$1.out"))"
  fi
  echo "TLS redis-server did not start: $(tail -n 5 "$T/redis_$1.out")" >&2; exit 1
}
rcli() { # rcli PORT ARGS...: redis-cli over mutual TLS
  _p=$1; shift
  redis-cli --tls --cacert "$P/ca.pem" --cert "$P/client.pem" --key "$P/client.key" \
    -p "$_p" -a "$PW" --no-auth-warning "$@"
}

TP=$(free_port)
start_tls_redis "$TP" no
R="rediss://:$PW@127.0.0.1:$TP"
CA="--redis-cacert $P/ca.pem"

serve_start up --log "$T/up.log"
N=40
for i in $(seq $N); do echo "$URL/k/$i"; done >"$T/in.txt"

# rtime PORT: Redis's clock (TIME, over TLS) in microseconds.
rtime() { rcli "$1" time | tr -d '\r' | { read -r a; read -r b; echo $((a * 1000000 + b)); }; }
# held LOG PATH N RATE BURST T0 T1: the N requests for PATH all reached the
# server, and N <= BURST + RATE x (T1 - T0), T0 and T1 Redis's clock before
# the run started and after it ended: the bound of the shared limit on
# Redis's clock, which no delay on the way can break.
held() {
  log_count "$1" "\"$2" "$3"
  python3 - "$@" <<'PY'
import json, sys
log, path, n, rate, burst, t0, t1 = sys.argv[1:8]
n, rate, burst = int(n), float(rate), int(burst)
t = (int(t1) - int(t0)) / 1e6
got = sum(1 for l in open(log) if l.strip() and path in json.loads(l)["path"])
print(f"  {got} requests in {t:.2f} s of Redis time; bound {burst} + {rate} x t = {burst + rate * t:.1f}")
sys.exit(0 if got == n and n <= burst + rate * t else 1)
PY
}

# ---- the limiter over TLS, one round trip per request ---------------------------
t0=$(rtime "$TP")
rc=0
"$S" batch "$T/in.txt" --db "$T/l1.db" --limiter "$R/tlskey" $CA --rate 40 --burst 4 -j 8 \
  --progress none -q >/dev/null 2>"$T/l1.err" || rc=$?
t1=$(rtime "$TP")
check "limiter over rediss:// with --redis-cacert: every job done ($rc: $(cat "$T/l1.err"))" \
  [ "$rc" = 0 ]
check "the shared limit held over TLS" held "$T/up.log" /k/ $N 40 4 "$t0" "$t1"
evals=$(rcli "$TP" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
check "the TLS Redis took the limiter's decisions (${evals:-0} EVALSHA)" [ "${evals:-0}" -ge $N ]
check "no password in the messages" sh -c "! grep -q '$PW' '$T/l1.err'"

# ---- leases over TLS ------------------------------------------------------------
for i in $(seq $N); do echo "$URL/lease/$i"; done >"$T/lease.txt"
t0=$(rtime "$TP")
rc=0
"$S" batch "$T/lease.txt" --db "$T/l2.db" --limiter "$R/leasekey" \
  --redis-capath "$P/capath" --rate 100 --burst 20 --limiter-lease 40ms -j 8 \
  --progress none -q >/dev/null 2>"$T/l2.err" || rc=$?
t1=$(rtime "$TP")
check "leases over rediss:// with --redis-capath: every job done ($rc: $(cat "$T/l2.err"))" \
  [ "$rc" = 0 ]
check "the shared limit held with leases over TLS" held "$T/up.log" /lease/ $N 100 20 "$t0" "$t1"

# ---- the queue over TLS ---------------------------------------------------------
for i in $(seq 30); do echo "$URL/q/$i"; done >"$T/q.txt"
"$S" batch --queue "$R/tq" $CA --worker a -j 4 --rate 50 --burst 5 --progress none -q \
  "$T/q.txt" >/dev/null 2>"$T/qa.err" &
PA=$!
for _ in $(seq 600); do # a hang guard: until worker a has loaded the queue
  [ "$(rcli "$TP" HGET 'stagger:q:{tq}:meta' total)" = 30 ] && break
  sleep 0.05
done
rc=0
"$S" batch --queue "$R/tq" $CA --worker b -j 4 --rate 50 --burst 5 --progress none -q \
  >/dev/null 2>"$T/qb.err" || rc=$?
rca=0; wait "$PA" || rca=$?
check "two queue workers over TLS end with every job done ($rca $rc: $(cat "$T/qa.err" "$T/qb.err"))" \
  [ "$rca$rc" = 00 ]
rep=$("$S" batch report --queue "$R/tq" $CA --json 2>"$T/rep.err" || true)
jcheck "the report over TLS: 30 done" "${rep:-{\}}" 'j["states"]["done"] == 30'
log_count "$T/up.log" '"/q/' 30
check "each queued job reached the server once" \
  [ "$(grep -c '"/q/' "$T/up.log")" = 30 ]

# ---- refused without the CA ----------------------------------------------------
before=$(wc -l <"$T/up.log")
rc=0
SSL_CERT_FILE=/nonexistent SSL_CERT_DIR=/nonexistent \
  "$S" batch "$T/in.txt" --db "$T/l3.db" --limiter "$R/tlskey" --rate 40 --progress none -q \
  >/dev/null 2>"$T/noca.err" || rc=$?
check "without --redis-cacert: exit 6 ($rc)" [ "$rc" = 6 ]
check "the message says the certificate did not verify: $(cat "$T/noca.err")" \
  grep -q "certificate did not verify" "$T/noca.err"
check "no password in it" sh -c "! grep -q '$PW' '$T/noca.err'"
check "nothing was sent upstream" [ "$(wc -l <"$T/up.log")" = "$before" ]
rc=0
"$S" batch --queue "$R/tq" --redis-cacert "$P/other-ca.pem" --progress none -q \
  >/dev/null 2>"$T/qnoca.err" || rc=$?
check "the queue with an unrelated CA: exit 6 ($rc: $(cat "$T/qnoca.err"))" \
  sh -c "[ $rc = 6 ] && grep -q 'certificate did not verify' '$T/qnoca.err'"
rc=0
"$S" batch --queue "redis://:$PW@127.0.0.1:$TP/tq" --progress none -q \
  >/dev/null 2>"$T/plain.err" || rc=$?
check "redis:// to a TLS port: exit 6 ($rc: $(cat "$T/plain.err"))" [ "$rc" = 6 ]

# ---- --redis-insecure ------------------------------------------------------------
rc=0
"$S" batch report --queue "$R/tq" --redis-insecure >/dev/null 2>"$T/ins.err" || rc=$?
check "--redis-insecure connects ($rc: $(cat "$T/ins.err"))" [ "$rc" = 0 ]
check "--redis-insecure warns" grep -q "warning: --redis-insecure" "$T/ins.err"

# ---- usage errors ----------------------------------------------------------------
expect_exit "--redis-cacert without a rediss:// URL" 2 \
  "$S" batch "$T/in.txt" --db "$T/l4.db" --limiter "redis://127.0.0.1:$TP/k" $CA --rate 5
expect_exit "--redis-cacert of a missing file" 2 \
  "$S" batch report --queue "$R/tq" --redis-cacert "$T/nope.pem"
expect_exit "--redis-key without --redis-cert" 2 \
  "$S" batch report --queue "$R/tq" $CA --redis-key "$P/client.key"

# ---- mutual TLS -------------------------------------------------------------------
for i in $(seq 30); do echo "$URL/m/$i"; done >"$T/m.txt"
MP=$(free_port)
start_tls_redis "$MP" yes
M="rediss://:$PW@127.0.0.1:$MP"
rc=0
"$S" batch --queue "$M/mq" $CA --rate 50 --progress none -q "$T/m.txt" \
  >/dev/null 2>"$T/m0.err" || rc=$?
check "mutual TLS without a client certificate: exit 6 ($rc: $(cat "$T/m0.err"))" [ "$rc" = 6 ]
rc=0
"$S" batch --queue "$M/mq" $CA --redis-cert "$P/rogue.pem" --redis-key "$P/rogue.key" \
  --rate 50 --progress none -q "$T/m.txt" >/dev/null 2>"$T/m1.err" || rc=$?
check "mutual TLS with a certificate of another CA: exit 6 ($rc: $(cat "$T/m1.err"))" [ "$rc" = 6 ]
check "nothing was loaded by the refused workers" [ "$(rcli "$MP" EXISTS 'stagger:q:{mq}:jobs')" = 0 ]
t0=$(rtime "$MP")
rc=0
"$S" batch --queue "$M/mq" $CA --redis-cert "$P/client.pem" --redis-key "$P/client.key" \
  --rate 50 --burst 5 -j 4 --progress none -q "$T/m.txt" >/dev/null 2>"$T/m2.err" || rc=$?
t1=$(rtime "$MP")
check "mutual TLS with the client certificate: every job done ($rc: $(cat "$T/m2.err"))" \
  [ "$rc" = 0 ]
check "the shared limit (in the same TLS Redis) held" held "$T/up.log" /m/ 30 50 5 "$t0" "$t1"

finish
