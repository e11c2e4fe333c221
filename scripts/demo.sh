#!/bin/sh
# `make demo`: the job this project exists for, on loopback, in about two
# minutes. Usage: sh scripts/demo.sh [--build] BUILD_DIR (the release build;
# the binary is BUILD_DIR/src/cli/stagger). --build configures and builds it
# first, quietly: its output is shown only when the build fails.
#
# Every step that takes more than a few seconds shows its progress: the
# batch its own bar (or lines when stderr is not a terminal), the naive
# client a line read from the server's /__stats every second.
#
#  1. stagger sim replays the herd and the storm in virtual time (seconds)
#     and writes their charts to ./demo-out/.
#  2. stagger serve plays an API limited to 100 requests/s (burst 20,
#     Retry-After on 429); stagger batch runs 2000 lookups through it with
#     the default policy (adaptive rate: it is not told the limit), with its
#     progress bar and report.
#  3. The same 2000 lookups with the incident's client: 50 workers, a fixed
#     1 s sleep on 429 (bench/peers/naive/naive.py).
#  4. Both side by side, counted by the server: wall time, calls, 429s and
#     the peak offered load (most arrivals in any 1 s) and the herds (10 ms
#     slots with more than 5 arrivals: a client in lockstep sends its whole
#     herd within a few ms, every second).
# Only 127.0.0.1 is contacted; everything started here is stopped on exit.
set -eu

DO_BUILD=no
if [ "${1:-}" = --build ]; then DO_BUILD=yes; shift; fi
BUILD=${1:-build/release}
S=$BUILD/src/cli/stagger
OUT=demo-out
SRC=$(cd "$(dirname "$0")/.." && pwd)
N=${DEMO_JOBS:-2000}
RATE=100
BURST=20

if [ "$DO_BUILD" = yes ]; then
  printf '== 0. building stagger (release) ... '
  mkdir -p "$BUILD"
  blog=$BUILD/demo-build.log
  if { cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTG_BUILD_TESTS=OFF &&
       cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)"; } >"$blog" 2>&1; then
    echo "done"
  else
    echo "FAILED:"; cat "$blog"; exit 1
  fi
fi
[ -x "$S" ] || { echo "demo: $S not found; build first (make build)" >&2; exit 1; }
mkdir -p "$OUT"
T=$(mktemp -d /tmp/stagger-demo.XXXXXX)
SRV_PID=""
WATCH_PID=""
cleanup() {
  if [ -n "$WATCH_PID" ]; then kill "$WATCH_PID" 2>/dev/null || true; fi
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

echo "== 1. stagger sim: the herd and the storm in virtual time"
"$S" sim herd --trials 20 --svg "$OUT/herd.svg" --csv "$OUT/herd.csv" | tee "$OUT/herd.txt"
echo
"$S" sim storm --trials 5 --svg "$OUT/storm.svg" --csv "$OUT/storm.csv" | tee "$OUT/storm.txt"
echo

start_server() {
  "$S" serve --port 0 --rate $RATE --burst $BURST --retry-after seconds \
    --stats "$T/$1.stats" --log "$T/$1.log" >"$T/$1.out" 2>"$T/$1.err" &
  SRV_PID=$!
  PORT=""
  for _ in $(seq 1 100); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/$1.out")
    [ -n "$PORT" ] && break
    sleep 0.05
  done
  [ -n "$PORT" ] || { echo "demo: the server did not start: $(cat "$T/$1.err")" >&2; exit 1; }
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}
now() { date +%s.%N; }

# watch_progress PORT N NAME: a progress line every second from the server's
# /__stats (answered = admitted, calls, 429s), until stopped (SIGTERM). On a
# terminal the line is redrawn in place and cut to its width; elsewhere a
# line every 10 s.
watch_progress() {
  python3 - "$1" "$2" "$3" <<'PY' &
import json, os, shutil, signal, sys, time, urllib.request
port, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tty = sys.stdout.isatty()
t0 = time.monotonic()
last = [""]
def stop(*_):
    if tty and last[0]:
        sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
tick = 0
while True:
    time.sleep(1)
    tick += 1
    try:
        st = json.load(urllib.request.urlopen("http://127.0.0.1:%s/__stats" % port, timeout=2))
    except Exception:
        continue
    line = "%s: %d/%d answered, %d calls, %d x 429, %d s" % (
        name, st["admitted"], n, st["total"], st["limited"], time.monotonic() - t0)
    if tty:
        width = shutil.get_terminal_size((80, 24)).columns
        sys.stdout.write("\r" + line[:width - 1] + "\033[K")
        last[0] = line
    elif tick % 10 == 0:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
PY
  WATCH_PID=$!
}
stop_watch() {
  kill "$WATCH_PID" 2>/dev/null || true
  wait "$WATCH_PID" 2>/dev/null || true
  WATCH_PID=""
}

seq -f 'TRK%06g' 1 "$N" >"$T/keys.txt"

echo "== 2. stagger batch: $N lookups against an API limited to $RATE/s (not told the limit)"
start_server stagger
t0=$(now)
set +e
"$S" batch --db "$T/demo.db" --url "http://127.0.0.1:$PORT/track/{}" "$T/keys.txt"
rc=$?
set -e
t1=$(now)
stop_server
echo "(stagger batch exited $rc)"
echo

echo "== 3. the incident's client: 50 workers, fixed 1 s sleep on 429 (about 90 s)"
start_server naive
t2=$(now)
watch_progress "$PORT" "$N" naive
python3 "$SRC/bench/peers/naive/naive.py" "http://127.0.0.1:$PORT/track/" "$T/keys.txt" 50 \
  >"$T/naive.done"
t3=$(now)
stop_watch
echo "naive: $(cat "$T/naive.done")"
stop_server
echo

echo "== 4. side by side (counted by the server; ideal: $N / $RATE = $((N / RATE)) s)"
python3 - "$T" "$t0" "$t1" "$t2" "$t3" "$N" "$RATE" <<'PY'
import json, sys
T, t0, t1, t2, t3, n, rate = sys.argv[1], *map(float, sys.argv[2:6]), int(sys.argv[6]), float(sys.argv[7])
rows = []
for name, a, b in (("stagger batch (adaptive)", t0, t1), ("naive (fixed 1 s sleep, 50 workers)", t2, t3)):
    tag = "stagger" if name.startswith("stagger") else "naive"
    st = json.load(open(f"{T}/{tag}.stats"))
    bins = {}
    for line in open(f"{T}/{tag}.log"):
        b10 = json.loads(line)["t_us"] // 10000
        bins[b10] = bins.get(b10, 0) + 1
    herds = sum(1 for c in bins.values() if c > 5)
    rows.append((name, b - a, st["total"], st["limited"], st["max_in_1s"], herds))
print("%-38s %9s %7s %7s %8s %11s %7s" % ("client", "wall", "x ideal", "calls", "429s",
                                         "peak in 1 s", "herds"))
for name, wall, calls, lim, p1, herds in rows:
    print("%-38s %7.1f s %6.2fx %7d %7.1f%% %11d %7d" % (name, wall, wall / (n / rate), calls,
                                                       100.0 * lim / max(calls, 1), p1, herds))
print("(peak in 1 s: the most arrivals in any 1 s window of the whole run, t = 0 included, as")
print(" the server counted them; herds: 10 ms slots holding more than 5 arrivals; at 100/s the")
print(" server admits about one per 10 ms, so each herd is a burst of refusals.)")
PY
echo
echo "charts of the simulations (open in a browser): $(pwd)/$OUT/herd.svg $(pwd)/$OUT/storm.svg"
echo "(herd.svg: 'max N in 10 ms' counts the busiest 10 ms of the whole run; storm.svg: each"
echo " 'peak' is the busiest 100 ms scaled to a second, counted from t = 1 s: the first second,"
echo " when every worker starts at once, is left out, as its caption says.)"
