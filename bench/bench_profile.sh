#!/bin/sh
# bench_profile.sh BUILD_DIR: where the CPU of one request goes, by layer,
# for stagger and the peer each is measured against (issue #35: "profile
# before changing anything; report where the time goes, beside the
# peer's"). perf samples each program with its call graphs while it works,
# bench/perf_layers.py charges every sample to the layer that owns it, and
# the layers' shares are scaled to the CPU a request cost in the same run:
#  1. the proxy: wrk -t2 -c30 against an unlimited `stagger serve`, through
#     stagger proxy --rate 0 -j 100, nginx (proxy_pass, one worker,
#     keep-alive upstream) and h2o (proxy.reverse, one thread), the CPU of
#     the proxy's process (nginx: its worker) per request;
#  2. the durable batch: 50 000 keys (BENCH_PROFILE_KEYS) against an
#     unlimited server, `stagger batch --rate 0 -j 30` beside
#     `curl --parallel --parallel-max 30`, the client's CPU per job.
# Prints a "profile NAME cpu_us=.. LAYER=.." line per program (the
# analysis makes the table of docs/BENCHMARKS.md from them). Sampling
# slows each program a little, so the figures are a few percent above
# bench_proxy.sh's and bench_batch.sh's; the shares are what this is for.
# Skipped (exit 0, "skipped" on stdout) without perf, wrk or the right to
# sample. Asserts nothing. Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_profile.sh BUILD_DIR}
S=$B/src/cli/stagger
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
. "$ROOT/bench/proxy_lib.sh"
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
for tool in perf wrk curl; do
  command -v $tool > /dev/null 2>&1 || { echo "bench_profile: skipped ($tool missing)"; exit 0; }
done
perf record -q -o /dev/null -- true > /dev/null 2>&1 ||
  { echo "bench_profile: skipped (perf may not sample here: kernel.perf_event_paranoid)"; exit 0; }
KEYS=${BENCH_PROFILE_KEYS:-50000}
FREQ=${BENCH_PROFILE_FREQ:-999}
# The user stack perf copies at each sample, for the unwinding (a larger
# copy loses more samples than it unwinds; a sample that is not unwound
# past libc is charged "via unknown").
STACK=16384
T=$(mktemp -d /tmp/stg_bench_profile.XXXXXX)
SRV_PID="" PX_PID="" NGX_PID="" H2O_PID=""
cleanup() { stop $NGX_PID $H2O_PID $PX_PID $SRV_PID; rm -rf "$T"; }
trap cleanup EXIT INT TERM
ulimit -n 20000 2>/dev/null || true

# layers NAME DATA CPU_US [perf script filters...]: the profile line.
layers() {
  n=$1 data=$2 cpu=$3; shift 3
  perf script -i "$data" -F ip,sym,dso "$@" 2>/dev/null | "$PY" "$ROOT/bench/perf_layers.py" "$n" "$cpu"
}

"$S" serve --port 0 > "$T/srv" 2>&1 &
SRV_PID=$!
PORT=$(port_of "$T/srv" "$SRV_PID")

# ---- 1. the proxy and its peers under wrk -c30 -------------------------------
# profile_proxy NAME PID URL: a warm-up; a 4 s wrk run unsampled, whose
# CPU per request is the figure; then perf on PID for 3 s inside another
# (sampling with call graphs slows a program, and not every one alike:
# the shares come from it, the CPU does not).
profile_proxy() {
  wrk -t2 -c30 -d1s "$3" > /dev/null 2>&1 || true
  c0=$(cpu_ns "$2")
  wrk -t2 -c30 -d4s "$3" > "$T/$1.wrk" 2>&1 || true
  c1=$(cpu_ns "$2")
  n=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in.*/\1/p' "$T/$1.wrk")
  [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "profile $1: no requests" >&2; return 0; }
  cpu=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n / 1000}')
  perf record -q -F "$FREQ" --call-graph dwarf,$STACK -p "$2" -o "$T/$1.data" -- sleep 3 > /dev/null 2>&1 &
  rec=$!
  wrk -t2 -c30 -d4s "$3" > /dev/null 2>&1 || true
  wait $rec || true
  layers "$1" "$T/$1.data" "$cpu"
}

echo "bench_profile: the proxy" >&2
"$S" proxy --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$PORT" --rate 0 -j 100 > "$T/px" 2> "$T/pxerr" &
PX_PID=$!
PXPORT=$(port_of "$T/px" "$PX_PID")
profile_proxy stagger_proxy "$PX_PID" "http://127.0.0.1:$PXPORT/track/w"
stop "$PX_PID"; PX_PID=""

if nginx_proxy "$PORT"; then
  profile_proxy nginx "$NGXW" "http://127.0.0.1:$NGXPORT/track/w"
else
  echo "bench_profile: nginx missing, not profiled" >&2
fi
stop "$NGX_PID"; NGX_PID=""

if h2o_proxy "$PORT"; then
  profile_proxy h2o "$H2O_PID" "http://127.0.0.1:$H2OPORT/track/w"
  stop "$H2O_PID"; H2O_PID=""
else
  echo "bench_profile: h2o missing, not profiled" >&2
fi

# ---- 2. the durable batch beside curl --parallel ------------------------------
# profile_client NAME COMM CMD...: CMD run whole twice (each on a fresh
# database: rm of b.db), unsampled for its CPU per job (its own rusage),
# then under perf for the shares (the wrapper's samples are left out by
# COMM, the name CMD's threads run under).
RUSAGE='import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
open(sys.argv[1], "w").write("%f %d\n" % (ru.ru_utime + ru.ru_stime, status))'
profile_client() {
  n=$1 comm=$2; shift 2
  rm -f "$T"/b.db*
  "$PY" -c "$RUSAGE" "$T/$n.cpu" "$@" || true
  read -r secs status < "$T/$n.cpu" || return 0
  cpu=$(awk -v s="$secs" -v n="$KEYS" 'BEGIN {printf "%.1f", s * 1e6 / n}')
  rm -f "$T"/b.db*
  perf record -q -F "$FREQ" --call-graph dwarf,$STACK -o "$T/$n.data" -- \
    "$PY" -c "$RUSAGE" "$T/$n.cpu2" "$@" > /dev/null 2>&1 || true
  layers "$n" "$T/$n.data" "$cpu" --comms "$comm"
}

echo "bench_profile: the batch, $KEYS keys" >&2
echo "profile_keys $KEYS"
seq -f 'p%06g' 1 "$KEYS" > "$T/keys.txt"
sed "s|.*|url = \"http://127.0.0.1:$PORT/track/&\"\noutput = \"/dev/null\"|" "$T/keys.txt" > "$T/curl.cfg"
profile_client stagger_batch stagger "$S" batch --progress lines --db "$T/b.db" --rate 0 \
  --concurrency 30 --url "http://127.0.0.1:$PORT/track/{}" "$T/keys.txt"
profile_client curl_parallel curl curl -s --parallel --parallel-max 30 -K "$T/curl.cfg"
