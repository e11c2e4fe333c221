# `stagger batch` with nothing told (no -j, no --rate: the concurrency and
# the rate both learned, as `make demo` runs it) against `stagger serve
# --rate 100 --burst 20` that answers 429 with Retry-After: every job ends
# done and the run ends by itself. Guards the stall where the host's pace
# head, handed on from the pace FIFO, gave its learned slot back and then
# waited for a slot that the followers behind it held (200 in flight,
# none sent; before the fix 2 of 4 runs of 800 jobs stopped, most within
# the first 500). Three runs, a fresh server and database each; the wall
# clock is only a cap (90 s for what takes about 8 s).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_learned
N=800
seq -f 'L%05g' 1 "$N" >"$T/keys.txt"
for run in 1 2 3; do
  serve_start "srv$run" --rate 100 --burst 20 --retry-after seconds --log "$T/srv$run.log"
  set +e
  timeout -k 5 90 "$S" batch -q --db "$T/r$run.db" --url "http://127.0.0.1:$PORT/track/{}" \
    "$T/keys.txt" >"$T/r$run.out" 2>"$T/r$run.err"
  rc=$?
  set -e
  kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; SRV_PID=""
  check "run $run: exits 0 by itself (124: stalled), got $rc: $(tail -n 2 "$T/r$run.err")" [ "$rc" = 0 ]
  j=$("$S" batch report --db "$T/r$run.db" --json)
  jcheck "run $run: every job done" "$j" "j['states']['done'] == $N and j['jobs'] == $N"
  ok=$(python3 -c 'import json,sys; print(len({r["path"] for r in map(json.loads, open(sys.argv[1])) if r["status"] == 200}))' "$T/srv$run.log")
  check "run $run: the server answered every key 200 (got $ok)" [ "$ok" = "$N" ]
done
finish
