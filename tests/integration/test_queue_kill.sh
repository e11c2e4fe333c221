# The work queue survives workers that die: 4 workers on 2000 jobs against
# `stagger serve --rate 100`, two of them killed with SIGKILL mid-run, a
# fifth started later. Every job ends in exactly one state (done); a job
# answered twice at the server was in flight in a killed worker (its
# pending list, read right after the kill); the server never sees more
# than burst + rate * t of Redis time. Two workers load the input at once
# (no job twice). Starts its own redis-server and server on 127.0.0.1.
#
# Bounds: --deadline 8s < --claim-idle 10s, so a live worker's job is never
# taken from it (a job ends within its deadline), and the killed workers'
# pending lists are read long before anyone may take them. The kills wait
# for lines in the server's log, never for a sleep.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch qkill
. "$(dirname "$0")/queue_lib.sh"

RPORT=$(free_port)
start_redis
serve_start srv --rate 100 --log "$T/srv.log"
SPID=$SRV_PID
N=2000; RATE=100; BURST=10
for i in $(seq $N); do echo "$URL/item/$i"; done >"$T/in.txt"
Q="redis://127.0.0.1:$RPORT/kill"
work() { # work NAME [INPUT]: a worker in the background, its pid in WPID
  _w=$1; shift
  "$S" batch --queue "$Q" --worker "$_w" -j 10 --rate $RATE --burst $BURST --claim-idle 10s \
    --deadline 8s --progress none "$@" >"$T/$_w.out" 2>"$T/$_w.err" &
  WPID=$!
}
t0=$(redis_time)
work w1 "$T/in.txt"; P1=$WPID
work w2 "$T/in.txt"; P2=$WPID
wait_grep "$T/w1.err" "jobs loaded into queue"
wait_grep "$T/w2.err" "jobs loaded into queue"
work w3; P3=$WPID
work w4; P4=$WPID

wait_lines "$T/srv.log" 400
kill -9 "$P2"; wait "$P2" 2>/dev/null || true
pending_ids kill w2 >"$T/killed.ids"
wait_lines "$T/srv.log" 800
kill -9 "$P3"; wait "$P3" 2>/dev/null || true
pending_ids kill w3 >>"$T/killed.ids"
wait_lines "$T/srv.log" 1000
work w5; P5=$WPID
for p in $P1 $P4 $P5; do
  rc=0; wait "$p" || rc=$?
  check "a surviving worker exits 0 (every job done): $rc $(tail -n 3 "$T"/w*.err)" [ "$rc" = 0 ]
done
t1=$(redis_time)
serve_stop "$SPID" || true

loaded=$(cat "$T/w1.err" "$T/w2.err" | sed -n 's/.*: \([0-9]*\) jobs loaded into queue.*/\1/p' | awk '{ s += $1 } END { print s }')
check "two loaders at once added every job once: $loaded" [ "$loaded" = $N ]
check "the stream holds each job once" [ "$(redis-cli -p "$RPORT" XLEN 'stagger:q:{kill}:jobs')" = $N ]
"$S" batch export --queue "$Q" >"$T/export.jsonl"
check "every job in exactly one state, done" python3 - "$T/export.jsonl" $N <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ids = [r["job"] for r in rows]
bad = [r for r in rows if r["state"] != "done"]
print(f"  {len(rows)} rows, {len(set(ids))} jobs, not done: {bad[:3]}")
sys.exit(0 if len(rows) == int(sys.argv[2]) and len(set(ids)) == len(rows) and not bad else 1)
PY
"$S" batch report --queue "$Q" --json >"$T/report.json"
jcheck "the report counts $N done, nothing left" "$(cat "$T/report.json")" \
  "j['states']['done'] == $N and j['ended'] == $N and j['states']['pending'] == 0 and j['states']['inflight'] == 0"
jcheck "the report names the five workers" "$(cat "$T/report.json")" \
  'sorted(w["name"] for w in j["workers"]) == ["w1", "w2", "w3", "w4", "w5"]'
check "duplicates at the server only for jobs in flight in a killed worker" \
  python3 - "$T/srv.log" "$T/killed.ids" $N <<'PY'
import json, sys, collections
ok = collections.Counter()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["path"].startswith("/item/") and r["status"] == 200:
        ok[int(r["path"][6:])] += 1
killed = {int(x) for x in open(sys.argv[2]).read().split()}
dup = {k for k, v in ok.items() if v > 1}
print(f"  {len(ok)} jobs answered, {len(dup)} twice, {len(killed)} in flight in killed workers")
sys.exit(0 if len(ok) == int(sys.argv[3]) and dup <= killed else 1)
PY
check "the server saw at most burst + rate * t of Redis time" python3 - "$T/srv.log" $t0 $t1 $RATE $BURST <<'PY'
import sys
n = sum(1 for _ in open(sys.argv[1]))
t0, t1, rate, burst = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
bound = burst + rate * (t1 - t0) / 1e6
print(f"  {n} requests over {(t1 - t0) / 1e6:.1f} s of Redis time; bound {bound:.0f}")
sys.exit(0 if n <= bound else 1)
PY
finish
