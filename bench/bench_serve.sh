#!/usr/bin/env bash
# Throughput of `stagger serve` (no limit, no faults) against nginx serving
# a small static file, both on 127.0.0.1 with the same number of worker
# threads/processes, measured by wrk (-t2 -c64 -d5s, keep-alive). Prints
# both rates and their ratio; the goal is at least half nginx's rate.
# Asserts nothing about speed. Bounded: about 20 s.
#   bench/bench_serve.sh [BUILD_DIR]     (default build/release)
set -euo pipefail
# The stdlib-only helpers run on the system python when there is one (a
# version-manager shim can cost most of a second per start).
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build/release}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
STAGGER="$BUILD/src/cli/stagger"
. "$ROOT/bench/nginx_lib.sh"
[ -x "$STAGGER" ] || { echo "bench_serve: no $STAGGER (run make build)" >&2; exit 2; }

sh "$ROOT/scripts/deps.sh" bench
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "bench_serve: nginx not found" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench_serve: wrk not found" >&2; exit 2; }

TMP=$(mktemp -d)
SRV_PID=""
NGX_PID=""
cleanup() {
    [ -n "$SRV_PID" ] && kill -TERM "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
    [ -n "$NGX_PID" ] && kill -QUIT "$NGX_PID" 2>/dev/null && wait "$NGX_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

WORKERS=$(nproc 2>/dev/null || echo 2)
[ "$WORKERS" -gt 16 ] && WORKERS=16
DURATION=5s
PATH_URL=/track/ABC123

# rps URL: requests/s measured by wrk (loopback only).
rps() {
    timeout 30 wrk -t2 -c64 -d"$DURATION" "$1" >"$TMP/wrk.out" 2>&1 || true
    awk '/^Requests\/sec:/ {print $2}' "$TMP/wrk.out"
}

# --- stagger serve ------------------------------------------------------------
"$STAGGER" serve --port 0 --threads "$WORKERS" >"$TMP/serve.out" 2>"$TMP/serve.err" &
SRV_PID=$!
for _ in $(seq 100); do
    [ -s "$TMP/serve.out" ] && break
    sleep 0.05
done
line=$(head -n1 "$TMP/serve.out")
case "$line" in "listening on http://127.0.0.1:"[0-9]*) ;; *) echo "bench_serve: $line $(cat "$TMP/serve.err")" >&2; exit 1 ;; esac
SPORT=${line##*:}
curl -s -o /dev/null "http://127.0.0.1:$SPORT$PATH_URL"
STG_RPS=$(rps "http://127.0.0.1:$SPORT$PATH_URL")
kill -TERM "$SRV_PID"
wait "$SRV_PID" || true
SRV_PID=""

# --- nginx on a free loopback port, a small static file --------------------------
NPORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$TMP/www/track"
printf '{"path":"%s","ok":true}' "$PATH_URL" >"$TMP/www/track/ABC123"
nginx_run "$TMP/ngx" "$WORKERS" "$NPORT" "$PATH_URL" <<EOF || true
    server {
        listen 127.0.0.1:$NPORT;
        root $TMP/www;
    }
EOF
NGX_RPS=$(rps "http://127.0.0.1:$NPORT$PATH_URL")

"$PYTHON" - "$STG_RPS" "$NGX_RPS" "$WORKERS" <<'EOF'
import sys
s, n, w = float(sys.argv[1] or 0), float(sys.argv[2] or 0), sys.argv[3]
print("bench_serve: wrk -t2 -c64 -d5s, %s worker threads/processes each" % w)
print("  stagger serve  %10.0f req/s" % s)
print("  nginx (static) %10.0f req/s" % n)
if n > 0:
    r = s / n
    print("  ratio          %10.2f  (goal >= 0.50: %s)" % (r, "met" if r >= 0.5 else "NOT met"))
EOF
