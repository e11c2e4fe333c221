#!/bin/sh
# bench_mem.sh BUILD_DIR [OTHER_STAGGER]: the peak memory (max RSS, from
# /usr/bin/time -v) of `stagger batch` with a 1M-line JSONL input
# (BENCH_LINES to change it), in three runs on one database:
#   import    a new database: the input is read and imported
#   check     the same input again: read and checked against the database
#   db only   no input: the run resumes from the database alone (not with
#             BENCH_SECRETS=1: such a run is refused)
# Each run is stopped by SIGTERM once it has said it started (imported or
# resuming), so the figure is the import or check plus the first moments of
# the run, at --rate 1 against a local `stagger serve` (only 127.0.0.1 is
# contacted). With OTHER_STAGGER (e.g. a build of an older commit) the same
# runs are measured for it too, on its own database, for a before/after
# table. BENCH_SECRETS=1 puts an api_key in every URL: every job then needs
# its input at run time (the secret is not stored). Prints figures, asserts
# nothing. Takes about a minute per binary.
set -eu
B=${1:?usage: bench/bench_mem.sh BUILD_DIR [OTHER_STAGGER]}
S=$B/src/cli/stagger
OTHER=${2:-}
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
N=${BENCH_LINES:-1000000}
Q=""
[ "${BENCH_SECRETS:-0}" = 1 ] && Q="?api_key=k0123456789abcdef"
T=$(mktemp -d /tmp/stg_bench_mem.XXXXXX)
SRV_PID=""
RUN_PID=""
cleanup() {
  for p in $RUN_PID $SRV_PID; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

"$S" serve --port 0 --rate 1000 --burst 100 >"$T/srv" 2>&1 &
SRV_PID=$!
PORT=""
i=0
while [ $i -lt 100 ]; do
  PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/srv")
  [ -n "$PORT" ] && break
  sleep 0.05
  i=$((i + 1))
done
[ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }

awk -v n="$N" -v port="$PORT" -v q="$Q" 'BEGIN {
  for (i = 1; i <= n; i++)
    printf "{\"id\":\"job-%07d\",\"url\":\"http://127.0.0.1:%d/track/%07d%s\",\"headers\":{\"X-Trace\":\"trace-%07d\"}}\n", i, port, i, q, i
}' >"$T/in.jsonl"

# measure BIN LABEL DB [INPUT]: runs BIN batch until it has started, stops
# it, prints "LABEL max-RSS-in-MiB".
measure() {
  bin=$1 label=$2 db=$3
  shift 3
  : >"$T/err"
  rm -f "$T/pid"
  /usr/bin/time -v -o "$T/time" sh -c 'echo $$ >"$0"; exec "$@"' "$T/pid" \
    "$bin" batch --db "$db" --rate 1 --burst 1 --progress none "$@" 2>"$T/err" >/dev/null &
  RUN_PID=$!
  while ! grep -q 'jobs imported into\|resuming' "$T/err" 2>/dev/null; do
    if ! kill -0 "$RUN_PID" 2>/dev/null; then cat "$T/err" >&2; exit 1; fi
    sleep 0.1
  done
  kill -TERM "$(cat "$T/pid")"
  wait "$RUN_PID" || true
  RUN_PID=""
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$T/time")
  wall=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$T/time")
  awk -v l="$label" -v kb="$kb" -v w="$wall" \
    'BEGIN { printf "  %-10s %8.1f MiB  (%s until stopped)\n", l, kb / 1024, w }'
}

run_all() {
  bin=$1 tag=$2
  echo "$bin ($N lines${Q:+ with a secret each}, $(du -m "$T/in.jsonl" | cut -f1) MB of input):"
  measure "$bin" import "$T/$tag.db" "$T/in.jsonl"
  measure "$bin" check "$T/$tag.db" "$T/in.jsonl"
  # With secrets, a run without the input is refused (it needs them).
  [ -z "$Q" ] && measure "$bin" "db only" "$T/$tag.db"
  return 0
}

run_all "$S" this
[ -n "$OTHER" ] && run_all "$OTHER" other
exit 0
