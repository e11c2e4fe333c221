# A batch of 2000 jobs over TLS opens at most --concurrency connections,
# so it makes at most that many TLS handshakes: counted from the server's
# side (connections_opened in /__stats: every connection accepted) and
# from libcurl's (the connects of each attempt_end in --log, summed, and
# the handshakes). The bound is the protocol's: keep-alive lets each of
# the N slots carry its requests on one connection; a new one would only
# come from a connection the server closed, which this server does not.
# The CA is made here by openssl (tls_certs.sh, into the build dir).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" batch --help >/dev/null 2>&1 || ! "$S" serve --help >/dev/null 2>&1; then
  skip "stagger batch or serve not built: skipped"
fi
command -v openssl >/dev/null || skip "openssl not installed: skipped"
scratch tlsb
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR
PKI=$T/pki
sh "$(dirname "$0")/tls_certs.sh" "$PKI"
CA=$PKI/ca.pem

# within LO X HI: LO <= X <= HI (integers).
within() { [ "$2" -ge "$1" ] && [ "$2" -le "$3" ]; }

stat() {
  curl -s --cacert "$CA" "$URL/__stats" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

N=2000
J=8
serve_start tls --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key"
seq 1 $N | sed "s|^|$URL/job/|" > "$T/urls"
before=$(stat connections_opened)
expect_exit "2000 jobs over TLS: every job done" 0 \
  "$S" batch -q --rate 0 -j $J --cacert "$CA" --db "$T/b.db" --log "$T/b.log" "$T/urls"
after=$(stat connections_opened)
# The stats request itself is one more connection.
server_conns=$((after - before - 1))
check "server: $N requests arrived" [ "$(stat total)" = $N ]
check "server: at most $J connections for $N jobs (got $server_conns)" \
  within 1 "$server_conns" $J
python3 - "$T/b.log" > "$T/counts" <<'PY'
import json, sys
attempts = connects = handshakes = reused = 0
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j["event"] == "attempt_end":
        attempts += 1
        connects += j["connects"]
        reused += j["conn_reused"]
        handshakes += "tls_handshake_ms" in j
print(attempts, connects, handshakes, reused)
PY
read -r attempts connects handshakes reused < "$T/counts"
check "client: $N attempts (got $attempts)" [ "$attempts" = $N ]
check "client: at most $J connections opened (got $connects)" within 1 "$connects" $J
check "client: as many handshakes as connections ($handshakes, $connects)" \
  [ "$handshakes" = "$connects" ]
check "client and server count the same connections" [ "$connects" = "$server_conns" ]
check "client: every other attempt reused a connection" [ "$reused" = $((N - connects)) ]
finish
