#!/bin/sh
# bench_mem.sh BUILD_DIR [OTHER_STAGGER]: memory per request in flight and
# memory against body size (issue #19 goal 2), on 127.0.0.1 only. Prints
# rows, asserts nothing. A Release build (make build) gives the figures
# that count; BUILD_DIR/bench/bench_engine_mem is used when built.
#
# "In flight" (docs/ARCHITECTURE.md, "Memory"): accepted and not done: a
# request the engine has taken (a job the batch runner claimed: inflight in
# the database) whether it waits (queue, limiter, backoff, breaker) or is on
# the wire. Only a request on the wire holds a curl easy handle, a
# connection and libcurl's buffers; a waiting one costs its own struct, URL
# and headers. So the goal (<= 4 KB per request at 10 000 in flight) is
# measured where the requests wait; on the wire, libcurl's own floor
# (libcurl alone, the same run) is measured beside stagger and the peers,
# which have nothing but the wire, and stagger's share above it is shown:
#
#  1. waiting: N (BENCH_MEM_N, default 10000) accepted, a few on the wire
#     (engine: 100 slots, or N slots behind a 50/s limiter; batch: -j N
#     --rate 50, the jobs claimed and waiting for the limiter), against
#     `stagger serve --latency 3s`; held HOLD (4 s), then stopped.
#  2. on the wire: N transfers at once against `serve --latency 3s` (each
#     answer takes 3 s, so all of them are open together): libcurl alone
#     (BUILD_DIR/bench/bench_curl_floor: one curl_multi, URL, a write
#     callback that discards, HTTP/1.1; the floor under stagger, with
#     libcurl's 16 KiB buffer and with CURLOPT_BUFFERSIZE 1 KiB, its
#     minimum, and its heap by size class), the engine (with its heap per
#     request and libcurl's part of it, so "engine - floor" and stagger's
#     own heap are shown; floor and engine at each of BENCH_MEM_WIRE_NS,
#     default "1000 N"), stagger batch -j N --rate 0 (and batch - floor),
#     curl --parallel (its --parallel-max is at most
#     300 in curl 7.88: measured there), Go go-retryablehttp, Node got,
#     Python requests (the peers of make bench, those present; Python at
#     BENCH_MEM_PY_N, default 2000: one OS thread per request; Node from
#     BENCH_MEM_NODE_DIR, default bench/peers/node, after its npm ci).
#  3. body size: 30 concurrent 200 MB bodies against 30 of 1 MB
#     (BENCH_MEM_BIG, BENCH_MEM_SMALL bytes) from stg_hostile's big-body
#     mode (built from tests/hostile/hostile.c when the build has none),
#     with --out DIR and into the database; the goal: the big run's peak
#     within 64 MB of the small run's.
#
# Per request = (peak RSS at N - peak RSS at 10) / (N - 10); peak = VmHWM
# (/proc/PID/status, read before the stop) or /usr/bin/time's maximum
# resident set for a run that ends by itself. BENCH_MEM_PARTS picks parts
# (default "waiting wire body"; "import" adds the old import/check/db-only
# rows of a BENCH_LINES-line input, default 1M). With OTHER_STAGGER (another
# build's binary) its batch rows are measured too, for a before/after.
set -eu
B=${1:?usage: bench/bench_mem.sh BUILD_DIR [OTHER_STAGGER]}
case "$B" in /*) ;; *) B=$(pwd)/$B ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=$B/src/cli/stagger
EB=$B/bench/bench_engine_mem
FB=$B/bench/bench_curl_floor
OTHER=${2:-}
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
N=${BENCH_MEM_N:-10000}
PY_N=${BENCH_MEM_PY_N:-2000}
WIRE_NS="1000 $N"
[ "$N" -le 1000 ] && WIRE_NS=$N
WIRE_NS=${BENCH_MEM_WIRE_NS:-$WIRE_NS}
HOLD=${BENCH_MEM_HOLD:-4}
BIG=${BENCH_MEM_BIG:-200000000}
SMALL=${BENCH_MEM_SMALL:-1000000}
PARTS=${BENCH_MEM_PARTS:-waiting wire body}
PY=/usr/bin/python3
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
T=$(mktemp -d /tmp/stg_bench_mem.XXXXXX)
SRV_PID=""
RUN_PID=""
cleanup() {
  for p in $RUN_PID $SRV_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT INT TERM
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# start_server CMD...: runs it, PORT from its "listening on" line.
start_server() {
  "$@" >"$T/srv" 2>&1 &
  SRV_PID=$!
  PORT=""
  i=0
  while [ $i -lt 100 ]; do
    # (the file may not be there yet: the server's shell opens it)
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/srv" 2>/dev/null || true)
    [ -n "$PORT" ] && return 0
    sleep 0.05
    i=$((i + 1))
  done
  echo "server did not start: $*" >&2
  exit 1
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }
# per KIB_SMALL KIB_BIG N_SMALL N_BIG: bytes per request between the runs.
per() { awk -v a="$1" -v b="$2" -v n="$3" -v m="$4" 'BEGIN { printf "%.0f", (b - a) * 1024 / (m - n) }'; }
row() { printf '  %-44s %7s %8s %9s %12s  %s\n' "$@"; }
head_row() { row "client" "N" "RSS@10" "RSS@N" "bytes/req" "notes"; row "" "" "KiB" "KiB" "" ""; }

# batch_hold BIN N EXTRA...: peak KiB of `BIN batch` over N keys at -j N,
# read after HOLD s (then stopped with SIGTERM: the jobs go back to pending).
batch_hold() {
  bin=$1 n=$2
  shift 2
  seq -f 'k%06g' 1 "$n" >"$T/keys"
  rm -f "$T/hold.db" "$T/hold.db-wal" "$T/hold.db-shm"
  "$bin" batch --url "http://127.0.0.1:$PORT/track/{}" "$T/keys" --db "$T/hold.db" -j "$n" \
    --progress none "$@" >/dev/null 2>"$T/hold.err" &
  RUN_PID=$!
  sleep "$HOLD"
  k=$(hwm "$RUN_PID")
  kill -TERM "$RUN_PID" 2>/dev/null || true
  wait "$RUN_PID" 2>/dev/null || true
  RUN_PID=""
  echo "${k:-0}"
}

# timed KEYS_N CMD...: max RSS KiB of CMD run to its end (capped at 120 s).
timed() {
  rm -f "$T/time"
  set +e
  timeout -k 5 120 /usr/bin/time -f '%M %e' -o "$T/time" "$@" >"$T/out" 2>"$T/err"
  set -e
  tail -1 "$T/time" | cut -d' ' -f1
}

# ---- 1. waiting ---------------------------------------------------------------
part_waiting() {
  echo "1. waiting in the engine: $N accepted, few on the wire (serve --latency 3s; held ${HOLD}s)"
  start_server "$S" serve --port 0 --latency 3s
  head_row
  if [ -x "$EB" ]; then
    for mode in "100 0" "$N 50"; do
      set -- $mode
      "$EB" "http://127.0.0.1:$PORT" 10 "$1" "$2" "$HOLD" >"$T/e10"
      "$EB" "http://127.0.0.1:$PORT" "$N" "$1" "$2" "$HOLD" >"$T/eN"
      a=$(sed -n '1s/.*peak_kib=\([0-9]*\).*/\1/p' "$T/e10")
      a0=$(sed -n '1s/.*rss0_kib=\([0-9]*\).*/\1/p' "$T/e10")
      b=$(sed -n '1s/.*peak_kib=\([0-9]*\).*/\1/p' "$T/eN")
      b0=$(sed -n '1s/.*rss0_kib=\([0-9]*\).*/\1/p' "$T/eN")
      wire=$(sed -n '1s/.*max_on_wire=\([0-9]*\).*/\1/p' "$T/eN")
      what="engine, $1 slots"
      [ "$2" != 0 ] && what="engine, $1 slots, limiter $2/s"
      v=$(per $((a - a0)) $((b - b0)) 0 "$N")
      if [ "$2" = 0 ]; then G_ENG_Q=$v; else G_ENG_L=$v; fi
      row "$what" "$N" "$a" "$b" "$v" "peak - idle engine; at most $wire on the wire"
    done
  else
    echo "  (no $EB: the engine rows need the bench target built)"
  fi
  for bin in "$S" $OTHER; do
    a=$(batch_hold "$bin" 10 --rate 50)
    b=$(batch_hold "$bin" "$N" --rate 50)
    label="stagger batch -j N --rate 50"
    v=$(per "$a" "$b" 10 "$N")
    if [ "$bin" = "$S" ]; then G_BATCH_W=$v; else label="other: batch -j N --rate 50" G_OTHER_W=$v; fi
    row "$label" "$N" "$a" "$b" "$v" "claimed jobs waiting for the limiter"
  done
  stop_server
}

# ---- 2. on the wire -------------------------------------------------------------
gopeer() {
  GOPEER=$B/bench-peers/retryablehttp-peer
  if command -v go >/dev/null 2>&1 && [ ! -x "$GOPEER" ]; then
    mkdir -p "$B/bench-peers"
    gocache=$(mktemp -d)
    (cd "$ROOT/bench/peers/go" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$gocache \
      GOPROXY=off GOFLAGS= go build -o "$GOPEER" .) >"$T/go-build.log" 2>&1 || true
    rm -rf "$gocache"
  fi
  [ -x "$GOPEER" ]
}

# wire_pair LABEL NMAX NOTE CMD-TEMPLATE: the command run with @N@ and
# @KEYS@ replaced, at 10 and at NMAX.
wire_pair() {
  label=$1 nmax=$2 note=$3
  shift 3
  r=""
  for n in 10 "$nmax"; do
    seq -f "w${n}x%06g" 1 "$n" >"$T/keys$n"
    rm -f "$T/w.db" "$T/w.db-wal" "$T/w.db-shm"
    cmd=$(printf '%s' "$*" | sed "s|@N@|$n|g; s|@KEYS@|$T/keys$n|g")
    # shellcheck disable=SC2086
    r="$r $(timed $cmd)"
  done
  # The peers print ok=N failed=N: all N answered means all were in flight.
  ok=$(grep -o 'ok=[0-9]*' "$T/out" | tail -1 || true)
  set -- $r
  WP=$(per "$1" "$2" 10 "$nmax")
  [ -n "$ok" ] && note="${note:+$note; }$ok"
  row "$label" "$nmax" "$1" "$2" "$WP" "$note"
}

part_wire() {
  echo "2. on the wire: N transfers at once (serve --latency 3s: every answer after 3 s)"
  start_server "$S" serve --port 0 --latency 3s
  U="http://127.0.0.1:$PORT/track/"
  head_row
  if [ -x "$FB" ]; then
    for bs in 0 1024; do
      "$FB" "http://127.0.0.1:$PORT" 10 "$bs" >"$T/f10"
      for n in $WIRE_NS; do
        "$FB" "http://127.0.0.1:$PORT" "$n" "$bs" >"$T/fN"
        a=$(sed -n '1s/.*peak_kib=\([0-9]*\).*/\1/p' "$T/f10")
        b=$(sed -n '1s/.*peak_kib=\([0-9]*\).*/\1/p' "$T/fN")
        v=$(per "$a" "$b" 10 "$n")
        hp=$(sed -n '1s/.*heap_per_xfer=\([0-9]*\).*/\1/p' "$T/fN")
        if [ "$bs" = 0 ]; then
          label="libcurl alone (floor), 16 KiB buffer"
          eval "G_FLOOR_$n=\$v"
          [ "$n" = "$N" ] && G_FLOOR=$v
        else
          label="libcurl alone, CURLOPT_BUFFERSIZE 1 KiB"
          eval "G_FLOOR1K_$n=\$v"
          [ "$n" = "$N" ] && G_FLOOR_1K=$v
        fi
        row "$label" "$n" "$a" "$b" "$v" "heap ${hp} B/xfer; $(sed -n '1s/.*\(ok=[0-9]*\).*/\1/p' "$T/fN")"
      done
      [ "$bs" = 0 ] && sed -n '2s/^floor classes/  libcurl heap by size/p' "$T/fN"
    done
  fi
  if [ -x "$EB" ]; then
    "$EB" "http://127.0.0.1:$PORT" 10 10 >"$T/e10"
    for n in $WIRE_NS; do
      "$EB" "http://127.0.0.1:$PORT" "$n" "$n" >"$T/eN"
      a=$(sed 's/.*peak_kib=\([0-9]*\).*/\1/;q' "$T/e10")
      b=$(sed 's/.*peak_kib=\([0-9]*\).*/\1/;q' "$T/eN")
      v=$(per "$a" "$b" 10 "$n")
      hp=$(sed -n '1s/.* heap_per_req=\([0-9]*\).*/\1/p' "$T/eN")
      ch=$(sed -n '1s/.*curl_heap_per_req=\([0-9]*\).*/\1/p' "$T/eN")
      [ "$n" = "$N" ] && G_ENG_WIRE=$v G_ENG_OWN_HEAP=$((hp - ch))
      f=$(eval "echo \${G_FLOOR_$n:-}")
      f1=$(eval "echo \${G_FLOOR1K_$n:-}")
      row "engine, N slots" "$n" "$a" "$b" "$v" \
        "$(sed -n '1s/.*\(max_on_wire=[0-9]*\).*\(ok=[0-9]*\).*/\1 \2/p' "$T/eN"); heap ${hp} B/req, libcurl's ${ch}"
      [ -n "$f" ] && row "  engine - floor" "$n" "" "" "$((v - f))" \
        "$((v - f1)) above the 1 KiB floor; stagger's own heap $((hp - ch)) B/req"
    done
    sed -n '2s/^engine classes/  libcurl heap by size in the engine/p' "$T/eN"
  fi
  for bin in "$S" $OTHER; do
    label="stagger batch -j N --rate 0"
    [ "$bin" != "$S" ] && label="other: batch -j N --rate 0"
    wire_pair "$label" "$N" "bodies in the database" \
      "$bin batch --url $U{} @KEYS@ --db $T/w.db -j @N@ --rate 0 --progress none"
    if [ "$bin" = "$S" ]; then G_BATCH_WIRE=$WP; else G_OTHER_WIRE=$WP; fi
    [ -n "${G_FLOOR:-}" ] && row "  batch - floor" "$N" "" "" "$((WP - G_FLOOR))" \
      "$((WP - G_FLOOR_1K)) above the 1 KiB floor"
  done
  if command -v curl >/dev/null 2>&1; then
    for n in 10 300; do
      seq -f "c${n}x%06g" 1 "$n" | sed "s|.*|url = \"$U&\"\noutput = \"/dev/null\"|" >"$T/curl$n.cfg"
    done
    wire_pair "curl --parallel --parallel-max N" 300 "curl 7.88 allows at most 300" \
      "curl -s --parallel --parallel-max @N@ -K $T/curl@N@.cfg"
    G_CURL=$WP
  fi
  if gopeer; then
    wire_pair "Go go-retryablehttp" "$N" "one goroutine each" "$GOPEER $U @KEYS@ @N@"
    G_GO=$WP
  else
    echo "  Go go-retryablehttp: not available (go build failed or no go)"
  fi
  ND=${BENCH_MEM_NODE_DIR:-$ROOT/bench/peers/node}
  if command -v node >/dev/null 2>&1 && [ -f "$ND/node_modules/got/package.json" ]; then
    wire_pair "Node got" "$N" "" "node $ND/peer.mjs $U @KEYS@ @N@"
    G_NODE=$WP
  else
    echo "  Node got: not available (node, or npm ci in bench/peers/node)"
  fi
  if [ -x "$PY" ] && "$PY" -c 'import requests' 2>/dev/null; then
    wire_pair "Python requests + urllib3 Retry" "$PY_N" "one thread each" \
      "$PY $ROOT/bench/peers/python/peer.py $U @KEYS@ @N@"
    G_PY=$WP
  else
    echo "  Python requests: not available"
  fi
  stop_server
}

# ---- 3. body size -----------------------------------------------------------------
hostile_bin() {
  H=$B/tests/integration/stg_hostile
  [ -x "$H" ] && return 0
  H=$T/stg_hostile
  cc -O2 -D_GNU_SOURCE -o "$H" "$ROOT/tests/hostile/hostile.c" -lpthread 2>"$T/cc.log"
}

body_run() { # SIZE MODE(out|db): max RSS KiB of 30 concurrent bodies of SIZE
  size=$1 mode=$2
  start_server "$H" --mode big-body --size "$size"
  seq -f 'b%02g' 1 30 >"$T/bkeys"
  rm -rf "$T/bodies" "$T/b.db" "$T/b.db-wal" "$T/b.db-shm"
  mkdir "$T/bodies"
  out=""
  [ "$mode" = out ] && out="--out $T/bodies"
  # shellcheck disable=SC2086
  k=$(timed "$S" batch --url "http://127.0.0.1:$PORT/{}" "$T/bkeys" --db "$T/b.db" -j 30 \
    --rate 0 --max-body 1000000000 --progress none $out)
  done_n=$(grep -c . "$T/bkeys")
  if [ "$mode" = out ]; then
    got=$(find "$T/bodies" -type f -size "${size}c" | wc -l)
  else
    got=$(sqlite3 "$T/b.db" "SELECT count(*) FROM responses WHERE length(body) = $size" 2>/dev/null || echo "?")
  fi
  stop_server
  rm -rf "$T/bodies" "$T/b.db" "$T/b.db-wal" "$T/b.db-shm"
  echo "$k $got/$done_n"
}

part_body() {
  echo "3. body size: 30 concurrent bodies, $BIG bytes against $SMALL (stg_hostile big-body)"
  if ! hostile_bin; then
    echo "  stg_hostile not built and cc failed (see tests/hostile/hostile.c)"
    return 0
  fi
  row "client" "N" "small" "big" "big - small" "bodies whole (small, big)"
  row "" "" "KiB" "KiB" "" ""
  for mode in out db; do
    set -- $(body_run "$SMALL" "$mode")
    a=$1 ga=$2
    set -- $(body_run "$BIG" "$mode")
    b=$1 gb=$2
    d=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f MiB", (b - a) / 1024 }')
    what="--out DIR"
    [ "$mode" = db ] && what="into the database"
    v=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 1024 }')
    if [ "$mode" = out ]; then G_BODY_OUT=$v; else G_BODY_DB=$v; fi
    row "stagger batch -j 30, $what" "30" "$a" "$b" "$d" "$ga, $gb (goal: within 64 MB)"
  done
}

# ---- 4. import (the rows of before) ---------------------------------------------
part_import() {
  L=${BENCH_LINES:-1000000}
  echo "4. import: peak RSS of stagger batch with a $L-line JSONL input (stopped once started)"
  start_server "$S" serve --port 0 --rate 1000 --burst 100
  awk -v n="$L" -v port="$PORT" 'BEGIN {
    for (i = 1; i <= n; i++)
      printf "{\"id\":\"job-%07d\",\"url\":\"http://127.0.0.1:%d/track/%07d\",\"headers\":{\"X-Trace\":\"trace-%07d\"}}\n", i, port, i, i
  }' >"$T/in.jsonl"
  row "run" "lines" "" "peak KiB" "" ""
  for bin in "$S" $OTHER; do
    db=$T/imp$(printf '%s' "$bin" | cksum | cut -d' ' -f1).db
    tag=this
    [ "$bin" != "$S" ] && tag=other
    for step in import check "db only"; do
      input="$T/in.jsonl"
      [ "$step" = "db only" ] && input=""
      : >"$T/ierr" # before the start: the wait below must not see the last run's line
      # shellcheck disable=SC2086
      "$bin" batch --db "$db" --rate 1 --burst 1 --progress none $input >/dev/null 2>"$T/ierr" &
      RUN_PID=$!
      while ! grep -q 'jobs imported into\|resuming' "$T/ierr" 2>/dev/null; do
        kill -0 "$RUN_PID" 2>/dev/null || break
        sleep 0.1
      done
      k=$(hwm "$RUN_PID")
      kill -TERM "$RUN_PID" 2>/dev/null || true
      wait "$RUN_PID" 2>/dev/null || true
      RUN_PID=""
      row "$tag: $step" "$L" "" "${k:-?}" "" ""
    done
  done
  stop_server
}

echo "bench_mem: $S ($(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
has waiting && part_waiting
has wire && part_wire
has body && part_body
has import && part_import
# One line for bench/analyze.py (issue #19 goal 2 row): bytes per request
# (waiting, on the wire, the peers on the wire), the body runs' growth in MiB;
# "-" where not measured.
echo "goal2: n=$N engine_queued=${G_ENG_Q:--} engine_limiter=${G_ENG_L:--}" \
  "batch_waiting=${G_BATCH_W:--} other_batch_waiting=${G_OTHER_W:--}" \
  "engine_wire=${G_ENG_WIRE:--} batch_wire=${G_BATCH_WIRE:--} other_batch_wire=${G_OTHER_WIRE:--}" \
  "curl_wire=${G_CURL:--} floor_wire=${G_FLOOR:--} floor_1k_wire=${G_FLOOR_1K:--}" \
  "engine_own_heap=${G_ENG_OWN_HEAP:--} go_wire=${G_GO:--} node_wire=${G_NODE:--} python_wire=${G_PY:--}" \
  "body_out_mib=${G_BODY_OUT:--} body_db_mib=${G_BODY_DB:--} big=$BIG small=$SMALL"
exit 0
