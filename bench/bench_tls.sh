#!/bin/bash
# bench_tls.sh BUILD_DIR: what HTTPS costs. N distinct requests (GET
# /track/KEY, default 5000) with 30 at a time against `stagger serve`
# without a limit, over plain HTTP and over TLS (--tls-cert with a test CA
# made here by openssl, tests/integration/tls_certs.sh), by
#   stagger batch --rate 0 --concurrency 30 (--cacert for TLS)
#   curl --parallel --parallel-max 30 (one config file, --cacert for TLS)
# and prints, per client and scheme, the wall time, requests/s and the
# connections the server accepted, which over TLS is the number of TLS
# handshakes (one per connection: keep-alive lets 30 connections carry all
# N requests). A fresh server per run; the stats request that reads the
# count is subtracted. Prints figures, asserts nothing. Only 127.0.0.1 is
# contacted.
set -eu
B=${1:?usage: bench/bench_tls.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_JOBS:-5000}
CONC=30
T=$(mktemp -d /tmp/stg_bench_tls.XXXXXX)
SRV_PID=""
cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
command -v openssl >/dev/null || { echo "bench_tls: openssl missing" >&2; exit 2; }
sh "$ROOT/tests/integration/tls_certs.sh" "$T/pki"
CA=$T/pki/ca.pem
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR
seq -f 'L%06g' 1 "$N" >"$T/keys.txt"

start_server() { # SCHEME
  if [ "$1" = https ]; then
    set -- --tls-cert "$T/pki/server.pem" --tls-key "$T/pki/server.key"
  else
    set --
  fi
  # A new file per server: the shell truncates it only in the forked
  # child, so a reused name could still show the previous server's line.
  RUN=$((${RUN:-0} + 1))
  "$S" serve --port 0 "$@" >"$T/srv.$RUN.out" 2>&1 &
  SRV_PID=$!
  URL=""
  i=0
  while [ $i -lt 200 ]; do
    URL=$(sed -n 's|^listening on \(https*://127\.0\.0\.1:[0-9]*\)$|\1|p' "$T/srv.$RUN.out" 2>/dev/null || true)
    [ -n "$URL" ] && break
    sleep 0.05
    i=$((i + 1))
  done
  [ -n "$URL" ] || { echo "server did not start: $(cat "$T/srv.$RUN.out")" >&2; exit 1; }
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}
stat() {
  curl -s --cacert "$CA" "$URL/__stats" |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["total"], j["connections_opened"])'
}
now() { date +%s.%N; }

# run CLIENT SCHEME: one row into $T/rows.
run() {
  c=$1 scheme=$2
  start_server "$scheme"
  ca=""
  [ "$scheme" = https ] && ca="--cacert $CA"
  t0=$(now)
  case $c in
    stagger)
      # shellcheck disable=SC2086
      timeout -k 5 300 "$S" batch -q --rate 0 --concurrency $CONC $ca --db "$T/$scheme.db" \
        --url "$URL/track/{}" "$T/keys.txt" || true
      ok=$("$S" batch report --db "$T/$scheme.db" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["states"]["done"])') ;;
    curl)
      sed "s|.*|url = \"$URL/track/&\"\noutput = \"/dev/null\"|" "$T/keys.txt" >"$T/curl.cfg"
      # shellcheck disable=SC2086
      timeout -k 5 300 curl -s --parallel --parallel-max $CONC $ca -K "$T/curl.cfg" -w '%{http_code}\n' \
        >"$T/curl.out" 2>/dev/null || true
      ok=$(grep -c '^200$' "$T/curl.out" || true) ;;
  esac
  t1=$(now)
  read -r total conns <<EOF
$(stat)
EOF
  stop_server
  conns=$((conns - 1)) # the stats request's own connection
  hs=0
  [ "$scheme" = https ] && hs=$conns
  label=$c
  [ "$c" = stagger ] && label="stagger batch --rate 0"
  [ "$c" = curl ] && label="curl --parallel --parallel-max $CONC"
  python3 -c 'import sys
label, scheme, n, ok, t0, t1, conns, hs = sys.argv[1:]
w = float(t1) - float(t0)
print("%-36s %-6s %6s %6s %7.2f s %8.0f %6s %10s" % (label, scheme, n, ok, w, int(n) / w, conns, hs))' \
    "$label" "$scheme" "$total" "$ok" "$t0" "$t1" "$conns" "$hs" >>"$T/rows"
}

echo "bench_tls: $N requests, $CONC at a time, no limit; server: stagger serve (GnuTLS)" >&2
for c in stagger curl; do
  for scheme in http https; do
    echo "  running: $c $scheme" >&2
    run "$c" "$scheme"
  done
done
printf '%-36s %-6s %6s %6s %9s %8s %6s %10s\n' "client" "scheme" "reqs" "ok" "wall" "req/s" \
  "conns" "handshakes"
cat "$T/rows"
echo "conns: connections the server accepted; handshakes: TLS handshakes (one per https connection)"
