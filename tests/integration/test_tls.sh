# HTTPS end to end: `stagger serve --tls-*` with a test CA made here by
# openssl (tls_certs.sh, into the build dir; nothing committed), and fetch
# and batch against it: verified with --cacert / --capath / the CA
# environment as curl reads it, refused without (exit 10, a message that
# says the certificate did not verify and was not retried, no request
# reached the server), -k works and warns, mutual TLS accepted and refused,
# one handshake per connection (-v, --metrics, the log), and a handshake
# the peer resets is a transport fault retried only when the method may
# repeat. Only loopback traffic; every server is stopped on exit.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1 || ! "$S" serve --help >/dev/null 2>&1; then
  skip "stagger fetch or serve not built: skipped"
fi
command -v openssl >/dev/null || skip "openssl not installed: skipped"
scratch tls

# The CA settings of this machine's environment would decide the tests
# below: each test sets what it means.
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR
PKI=${STG_BUILD_DIR:-$T}/tls-pki
rm -rf "$PKI"
sh "$(dirname "$0")/tls_certs.sh" "$PKI"
CA=$PKI/ca.pem

# stat KEY [CURL ARGS]: a number from /__stats, read over TLS with curl.
stat() {
  _k=$1; shift
  curl -s --cacert "$CA" "$@" "$URL/__stats" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$_k"
}

# ---- serve ----------------------------------------------------------------
expect_exit "serve: --tls-cert without --tls-key is usage" 2 "$S" serve --tls-cert "$PKI/server.pem"
expect_exit "serve: --tls-client-ca alone is usage" 2 "$S" serve --tls-client-ca "$CA"
expect_exit "serve: an unreadable certificate does not start" 1 \
  "$S" serve --tls-cert "$T/missing.pem" --tls-key "$PKI/server.key"
check "serve: the message names the file" grep -q "missing.pem" /tmp/stg_err.$$

serve_start tls --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key"
check "serve prints an https:// line" [ "${URL%%://*}" = https ]
check "/__stats says tls" [ "$(stat tls)" = True ]

# ---- fetch: verified ------------------------------------------------------
expect_exit "fetch --cacert verifies" 0 "$S" fetch --cacert "$CA" "$URL/a"
check "fetch --cacert got the body" grep -q '"ok":true' /tmp/stg_out.$$
expect_exit "fetch --capath verifies" 0 "$S" fetch --capath "$PKI/capath" "$URL/a"
expect_exit "CURL_CA_BUNDLE is honoured" 0 env CURL_CA_BUNDLE="$CA" "$S" fetch "$URL/a"
expect_exit "SSL_CERT_FILE is honoured" 0 env SSL_CERT_FILE="$CA" "$S" fetch "$URL/a"
expect_exit "SSL_CERT_DIR is honoured" 0 env SSL_CERT_DIR="$PKI/capath" "$S" fetch "$URL/a"
# As in curl: CURL_CA_BUNDLE wins over SSL_CERT_FILE, --cacert over both.
expect_exit "CURL_CA_BUNDLE before SSL_CERT_FILE" 10 \
  env CURL_CA_BUNDLE="$PKI/other-ca.pem" SSL_CERT_FILE="$CA" "$S" fetch "$URL/a"
expect_exit "--cacert before the environment" 0 \
  env CURL_CA_BUNDLE="$PKI/other-ca.pem" "$S" fetch --cacert "$CA" "$URL/a"

# ---- fetch: refused -------------------------------------------------------
before=$(stat total)
expect_exit "fetch without the CA: exit 10" 10 "$S" fetch --retries 3 --base 10ms "$URL/a"
check "the message says the certificate did not verify" grep -q "certificate did not verify" /tmp/stg_err.$$
check "the message says never retried, after 1 attempt" \
  sh -c "grep -q 'never retried' /tmp/stg_err.$$ && grep -q 'after 1 attempt ' /tmp/stg_err.$$"
check "the message says what to do" grep -q -- "--cacert" /tmp/stg_err.$$
expect_exit "fetch trusting another CA: exit 10" 10 "$S" fetch --cacert "$PKI/other-ca.pem" "$URL/a"
check "no request reached the server" [ "$(stat total)" = "$before" ]
expect_exit "an unreadable --cacert is usage" 2 "$S" fetch --cacert "$T/none.pem" "$URL/a"
check "an unreadable --cacert: names the option and the file" \
  grep -q -- "cannot read --cacert $T/none.pem" /tmp/stg_err.$$
expect_exit "--key without --cert is usage" 2 "$S" fetch --key "$PKI/client.key" "$URL/a"
check "--key without --cert: says so" grep -q -- "--key goes with --cert" /tmp/stg_err.$$
expect_exit "an unreadable --capath is usage" 2 "$S" fetch --capath "$T/nodir" "$URL/a"
check "an unreadable --capath: names the option and the directory" \
  grep -q -- "cannot read --capath $T/nodir" /tmp/stg_err.$$

# ---- fetch -k ----------------------------------------------------------------
expect_exit "fetch -k works" 0 "$S" fetch -k "$URL/a"
check "fetch -k warns" grep -q "warning: --insecure" /tmp/stg_err.$$
expect_exit "fetch --insecure works" 0 "$S" fetch --insecure -s "$URL/a"
check "fetch --insecure warns even with -s" grep -q "warning: --insecure" /tmp/stg_err.$$

# ---- one handshake per connection: -v, --metrics, --log-json -----------------
expect_exit "-v over a retried 503" 3 "$S" fetch -v --cacert "$CA" --retries 2 --base 10ms \
  --metrics "$T/m.prom" --log-json "$T/f.log" "$URL/status/503"
check "-v: attempt 1 opened a connection with a handshake" \
  grep -q "attempt 1: HTTP 503 .*new connection, TLS handshake" /tmp/stg_err.$$
check "-v: attempts 2 and 3 reused it" \
  [ "$(grep -c 'attempt [23]: HTTP 503 .*reused connection' /tmp/stg_err.$$)" = 2 ]
check "metrics: one handshake" grep -qx "stagger_tls_handshakes_total 1" "$T/m.prom"
check "metrics: one connection" grep -qx "stagger_connections_opened_total 1" "$T/m.prom"
check "metrics: two reuses" grep -qx "stagger_connections_reused_total 2" "$T/m.prom"
check "log: connects per attempt" \
  [ "$(grep '"attempt_end"' "$T/f.log" | python3 -c 'import json,sys; print([json.loads(l)["connects"] for l in sys.stdin])')" = "[1, 0, 0]" ]

# ---- batch -------------------------------------------------------------------
for i in 1 2 3 4 5; do echo "$URL/b/$i"; done > "$T/urls"
expect_exit "batch --cacert: every job done" 0 \
  "$S" batch -q --rate 0 --cacert "$CA" --db "$T/ok.db" "$T/urls"
expect_exit "batch without the CA: jobs failed" 1 \
  "$S" batch -q --rate 0 --db "$T/no.db" --log "$T/no.log" "$T/urls"
check "batch: the jobs failed on tls, one attempt each" \
  [ "$(grep -c '"event": *"attempt_end".*"error": *"tls"' "$T/no.log")" = 5 ]
"$S" batch export --db "$T/no.db" --format jsonl > "$T/no.jsonl" 2>/dev/null || true
check "batch: the job's error says the certificate did not verify" \
  grep -q "certificate did not verify" "$T/no.jsonl"
expect_exit "batch -k: every job done" 0 "$S" batch -q --rate 0 -k --db "$T/k.db" "$T/urls"
check "batch -k warns" grep -q "warning: --insecure" /tmp/stg_err.$$

# ---- mutual TLS ----------------------------------------------------------------
serve_start mtls --tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key" --tls-client-ca "$CA"
MURL=$URL
expect_exit "mTLS: the client certificate is accepted" 0 \
  "$S" fetch --cacert "$CA" --cert "$PKI/client.pem" --key "$PKI/client.key" "$MURL/m"
check "mTLS: the route's body" grep -q '"path":"/m"' /tmp/stg_out.$$
expect_exit "mTLS: no client certificate is refused (403)" 1 "$S" fetch --cacert "$CA" "$MURL/m"
check "mTLS: the message shows the 403" grep -q "HTTP 403" /tmp/stg_err.$$
expect_exit "mTLS: a certificate from another CA is refused" 1 \
  "$S" fetch --cacert "$CA" --cert "$PKI/rogue.pem" --key "$PKI/rogue.key" "$MURL/m"
check "mTLS: the server counted two refusals" \
  [ "$(stat tls_client_refused --cert "$PKI/client.pem" --key "$PKI/client.key")" = 2 ]
check "mTLS: refusals are not client traffic" \
  [ "$(stat total --cert "$PKI/client.pem" --key "$PKI/client.key")" = 1 ]
sed "s|^https://127.0.0.1:[0-9]*|$MURL|" "$T/urls" > "$T/murls"
expect_exit "mTLS batch: accepted (mTLS server)" 0 "$S" batch -q --rate 0 --cacert "$CA" \
  --cert "$PKI/client.pem" --key "$PKI/client.key" --db "$T/m2.db" "$T/murls"
expect_exit "mTLS batch: refused without a certificate" 1 \
  "$S" batch -q --rate 0 --cacert "$CA" --db "$T/m3.db" "$T/murls"

# ---- a handshake the peer resets: a transport fault -----------------------------
# A listener that reads the ClientHello and answers with a TCP reset.
python3 - "$T/rst.port" <<'EOF' &
import socket, struct, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
EOF
for _ in $(seq 600); do [ -s "$T/rst.port" ] && break; sleep 0.05; done
RURL="https://127.0.0.1:$(cat "$T/rst.port")"
expect_exit "a reset handshake: GET retried, then exit 7" 7 \
  "$S" fetch --cacert "$CA" --retries 2 --base 10ms "$RURL/r"
check "GET: 3 attempts" grep -q "after 3 attempts" /tmp/stg_err.$$
check "the message says transport fault" grep -q "TLS handshake reset or closed by the peer" /tmp/stg_err.$$
expect_exit "a reset handshake: a keyless POST is not repeated" 7 \
  "$S" fetch --cacert "$CA" --retries 2 --base 10ms -d x "$RURL/r"
check "POST: 1 attempt" grep -q "after 1 attempt " /tmp/stg_err.$$
expect_exit "a reset handshake: a POST with a key is retried" 7 \
  "$S" fetch --cacert "$CA" --retries 2 --base 10ms -d x --idempotency-key k1 "$RURL/r"
check "keyed POST: 3 attempts" grep -q "after 3 attempts" /tmp/stg_err.$$

finish
