#!/bin/sh
# bench_batch.sh BUILD_DIR: two parts, each printing rows (BENCH_PARTS picks:
# "incident unlimited", the default, or either one).
#
# incident: the batch incident (background.md section 2) on loopback. 2000
# lookups against `stagger serve --rate 100 --burst 20` (Retry-After: 1 on
# refusals), by:
#   stagger (rate given)  stagger batch --rate 100 --burst 20 --concurrency 30
#   stagger (adaptive)    stagger batch --concurrency 30 (no rate given)
#   naive fixed sleep     50 workers, 1 s sleep on 429 (python3, keep-alive)
# and prints, per client, the completion time over the ideal (2000 / 100 s =
# 20 s) and the share of calls answered 429, counted in the server's own
# request log. A fresh server per client. Takes about 1.5 minutes; goals:
# <= 1.05 with the rate given; <= 1.10 and under 2% 429s adaptive.
#
# unlimited (issue #19, goal 1): the durable batch against curl --parallel
# on `stagger serve` without a limit, 5000 and 50 000 keys (BENCH_SIZES),
# 30 at a time: curl --parallel --parallel-max 30 (output /dev/null), then
# stagger batch --rate 0 twice, once with its learned concurrency (no -j)
# and once with -j 30 (the baseline's 30 at once). Each row is the median
# of BENCH_REPEAT runs (default 5; the clients take turns, so a busy
# machine slows them alike; one run of a 0.3 s client moves by 15% here),
# a fresh server per run; wall = process start
# to exit, CPU = user + system of the client (its rusage), load = start to
# stagger's "jobs imported" line (parse, import, commit of the input);
# "x curl" = curl's wall (CPU) over the client's: 1.00 or more is as fast
# as curl. A "goal1_N:" line per size repeats the medians as KEY=VALUE
# words for bench/analyze.py (issue #19 goal 1's rows).
# Two more clients in the same turns, for what the goal rows do not say:
#   curl1  curl --parallel --parallel-max 30 with every answer to one
#          stdout (no file per URL, no -w): curl's fastest form, which
#          keeps no per-job answer;
#   two    two stagger batch processes started together, half the keys
#          and -j 15 each (two databases): the ceiling of a second network
#          loop in one batch (two processes share no store, no lock and no
#          queue, so one process with two loops gets less).
# BENCH_BASE_STAGGER=PATH adds another build's stagger (-j 30) in the same
# turns, for a before/after. Takes about two minutes.
#
# Prints figures, asserts nothing. Only 127.0.0.1 is contacted.
set -eu
B=${1:?usage: bench/bench_batch.sh BUILD_DIR}
S=$B/src/cli/stagger
[ -x "$S" ] || { echo "no $S: build first" >&2; exit 2; }
PARTS=${BENCH_PARTS:-incident unlimited}
N=${BENCH_JOBS:-2000}
RATE=100
BURST=20
T=$(mktemp -d /tmp/stg_bench_batch.XXXXXX)
SRV_PID=""
cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT INT TERM

seq -f 'T%05g' 1 "$N" >"$T/keys.txt"

start_server() {
  "$S" serve --port 0 --rate "$RATE" --burst "$BURST" --log "$T/$1.log" >"$T/$1.srv" 2>&1 &
  SRV_PID=$!
  PORT=""
  i=0
  while [ $i -lt 100 ]; do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/$1.srv")
    [ -n "$PORT" ] && break
    sleep 0.05
    i=$((i + 1))
  done
  [ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }
}
stop_server() {
  kill "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}
now() { date +%s.%N; }


# run_case NAME: runs the client in $T/NAME.cmd; appends a row to $T/rows.
run_case() {
  name=$1
  start_server "$name"
  t0=$(now)
  case $name in
    rate)
      "$S" batch -q --db "$T/rate.db" --url "http://127.0.0.1:$PORT/track/{}" \
        --rate $RATE --burst $BURST --concurrency 30 "$T/keys.txt" || true ;;
    adaptive)
      "$S" batch -q --db "$T/adaptive.db" --url "http://127.0.0.1:$PORT/track/{}" \
        --concurrency 30 "$T/keys.txt" || true ;;
    naive)
      python3 "$(dirname "$0")/peers/naive/naive.py" "http://127.0.0.1:$PORT/track/" \
        "$T/keys.txt" >"$T/naive.done" ;;
  esac
  t1=$(now)
  stop_server
  case $name in
    naive) ok=$(sed -n 's/^ok=\([0-9]*\).*/\1/p' "$T/naive.done") ;;
    *) ok=$("$S" batch report --db "$T/$name.db" --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["states"]["done"])') ;;
  esac
  python3 - "$name" "$t0" "$t1" "$T/$name.log" "$N" "$RATE" "$ok" >>"$T/rows" <<'PY'
import json, sys
name, t0, t1, log, n, rate, ok = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
st = [json.loads(l)["status"] for l in open(log)]
calls, r429 = len(st), sum(1 for s in st if s == 429)
ideal = n / rate
label = {"rate": "stagger, --rate 100 --burst 20", "adaptive": "stagger, adaptive (no rate)",
         "naive": "naive: 50 workers, 1 s sleep on 429"}[name]
print("%-38s %8.1f s %7.2fx %7d %7.1f%% %6d/%d" % (label, t1 - t0, (t1 - t0) / ideal, calls,
                                                   100.0 * r429 / max(calls, 1), ok, n))
PY
}

incident() {
  echo "bench_batch: $N jobs, server --rate $RATE --burst $BURST, ideal $((N / RATE)) s" >&2
  for c in rate adaptive naive; do
    echo "  running: $c" >&2
    run_case "$c"
  done
  printf '%-38s %10s %8s %7s %8s %8s\n' "client" "time" "/ideal" "calls" "429s" "done"
  cat "$T/rows"
}

# unlimited: one run of client $1 over $2 keys against a fresh unlimited
# server; appends "client keys done wall cpu load" to $T/unl.
unl_run() {
  c=$1 n=$2
  rm -f "$T/unl.srv" # not the last server's port, read before this one writes
  "$S" serve --port 0 >"$T/unl.srv" 2>&1 &
  SRV_PID=$!
  PORT=""
  i=0
  while [ $i -lt 100 ]; do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$T/unl.srv" 2>/dev/null || true)
    [ -n "$PORT" ] && break
    sleep 0.05
    i=$((i + 1))
  done
  [ -n "$PORT" ] || { echo "server did not start" >&2; exit 1; }
  rm -f "$T/unl.db" "$T/unl.db-wal" "$T/unl.db-shm"
  case $c in
    curl)
      sed "s|.*|url = \"http://127.0.0.1:$PORT/track/&\"\noutput = \"/dev/null\"|" \
        "$T/keys$n.txt" >"$T/curl.cfg"
      set -- curl -s --parallel --parallel-max 30 -K "$T/curl.cfg" -w '%{http_code}\n' ;;
    curl1)
      sed "s|.*|url = \"http://127.0.0.1:$PORT/track/&\"|" "$T/keys$n.txt" >"$T/curl.cfg"
      set -- curl -s --parallel --parallel-max 30 -K "$T/curl.cfg" ;;
    two)
      rm -f "$T/unl2.db" "$T/unl2.db-wal" "$T/unl2.db-shm"
      half=$((n / 2))
      head -n "$half" "$T/keys$n.txt" >"$T/keys$n.a"
      tail -n +$((half + 1)) "$T/keys$n.txt" >"$T/keys$n.b"
      # sh waits for both: its rusage holds both processes' CPU.
      set -- sh -c '"$1" batch --progress lines --db "$2" --rate 0 --concurrency 15 --url "$4" "$5" &
        "$1" batch --progress lines --db "$3" --rate 0 --concurrency 15 --url "$4" "$6"
        wait $!' two "$S" "$T/unl.db" "$T/unl2.db" "http://127.0.0.1:$PORT/track/{}" \
        "$T/keys$n.a" "$T/keys$n.b" ;;
    learned)
      set -- "$S" batch --progress lines --db "$T/unl.db" --rate 0 \
        --url "http://127.0.0.1:$PORT/track/{}" "$T/keys$n.txt" ;;
    j30)
      set -- "$S" batch --progress lines --db "$T/unl.db" --rate 0 --concurrency 30 \
        --url "http://127.0.0.1:$PORT/track/{}" "$T/keys$n.txt" ;;
    base)
      set -- "$BENCH_BASE_STAGGER" batch --progress lines --db "$T/unl.db" --rate 0 \
        --concurrency 30 --url "http://127.0.0.1:$PORT/track/{}" "$T/keys$n.txt" ;;
  esac
  python3 - "$c" "$n" "$S" "$T/unl.db" "$@" >>"$T/unl" <<'PY'
import json, os, subprocess, sys, time
c, n, stagger, db, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
t0 = time.monotonic()
p = subprocess.Popen(argv, stdout=subprocess.PIPE if c.startswith("curl") else subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
load = None
out = []
if c == "curl":
    out = p.stdout.read().split()
    p.stderr.read()
elif c == "curl1":  # the answers, back to back: one per "ok":true
    out = p.stdout.read().count('"ok":true')
    p.stderr.read()
else:
    for line in p.stderr:
        if load is None and "jobs imported into" in line:
            load = time.monotonic() - t0
_, status, ru = os.wait4(p.pid, 0)
wall = time.monotonic() - t0
cpu = ru.ru_utime + ru.ru_stime
if c == "curl":
    done = sum(1 for s in out if s == "200")
elif c == "curl1":
    done = out
else:
    done = 0
    for d in [db] + ([db[:-3] + "2.db"] if c == "two" else []):
        rep = json.loads(subprocess.run([stagger, "batch", "report", "--db", d, "--json"],
                                        capture_output=True, text=True).stdout)
        done += rep["states"]["done"]
print(c, n, done, "%.4f" % wall, "%.4f" % cpu, "%.4f" % load if load is not None else "-")
PY
  stop_unl
}

# The server by its PID: TERM, then KILL if it is still there after 5 s (a
# bench must not hang on a server that does not stop).
stop_unl() {
  kill "$SRV_PID" 2>/dev/null || true
  i=0
  while kill -0 "$SRV_PID" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.05
    i=$((i + 1))
  done
  kill -9 "$SRV_PID" 2>/dev/null || true
  wait "$SRV_PID" 2>/dev/null || true
  SRV_PID=""
}

unlimited() {
  reps=${BENCH_REPEAT:-5}
  : >"$T/unl"
  for n in ${BENCH_SIZES:-5000 50000}; do
    seq -f 'u%06g' 1 "$n" >"$T/keys$n.txt"
    echo "bench_batch: unlimited, $n keys, $reps runs of each client" >&2
    r=0
    while [ $r -lt "$reps" ]; do
      for c in curl learned j30 curl1 two ${BENCH_BASE_STAGGER:+base}; do unl_run "$c" "$n"; done
      r=$((r + 1))
    done
  done
  python3 - "$T/unl" <<'PY'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    c, n, done, wall, cpu, load = line.split()
    runs[(int(n), c)].append((float(wall), float(cpu), None if load == "-" else float(load), int(done)))
label = {"curl": "curl --parallel --parallel-max 30",
         "learned": "stagger batch --rate 0 (learned -j)",
         "j30": "stagger batch --rate 0 -j 30",
         "curl1": "curl --parallel, answers to stdout",
         "two": "2 stagger batch, half each, -j 15",
         "base": "BENCH_BASE_STAGGER, -j 30"}
print("%-36s %7s %7s %8s %8s %8s %8s %8s" % ("unlimited serve, 30 at a time", "keys", "done",
      "wall s", "CPU s", "load s", "wall x", "CPU x"))
summary = {}
for n in sorted({k[0] for k in runs}):
    med = {}
    for c in ("curl", "learned", "j30", "curl1", "two", "base"):
        rs = runs.get((n, c))
        if not rs:
            continue
        loads = [r[2] for r in rs if r[2] is not None]
        med[c] = (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs),
                  statistics.median(loads) if loads else None, min(r[3] for r in rs))
    base = med.get("curl")
    for c, (wall, cpu, load, done) in med.items():
        wx = "%.2fx" % (base[0] / wall) if base and wall > 0 else "-"
        cx = "%.2fx" % (base[1] / cpu) if base and cpu > 0 else "-"
        print("%-36s %7d %7d %8.3f %8.3f %8s %8s %8s" % (label[c], n, done, wall, cpu,
              "%.3f" % load if load is not None else "-", wx, cx))
    # goal 1's row in docs/BENCHMARKS.md (bench/analyze.py): the medians,
    # the turns they come from, and the least done of any run.
    summary["goal1_%d:" % n] = " ".join(
        "%s_%s=%s" % (c, k, v) for c, (wall, cpu, load, done) in med.items()
        for k, v in (("wall", "%.4f" % wall), ("cpu", "%.4f" % cpu), ("done", done))) + \
        " runs=%d" % min(len(runs[(n, c)]) for c in med)
for prefix, words in summary.items():
    print(prefix, words)
PY
}

for part in $PARTS; do
  case $part in
    incident) incident ;;
    unlimited) unlimited ;;
    *) echo "bench_batch: unknown part $part" >&2; exit 2 ;;
  esac
done
