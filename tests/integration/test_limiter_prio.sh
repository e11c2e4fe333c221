# Classes and tenants across processes through the CLI (issue #32's proof):
#  1. `stagger batch --priority batch -j 30` saturates a 50/s key held in
#     Redis while `stagger proxy` on the same key serves an interactive
#     client (Stagger-Priority: interactive) at 20% of the rate: the
#     interactive requests' admission wait (the proxy's log) p99 is within
#     two emission intervals plus the Redis round trip (measured beside, p99
#     of PINGs), the batch keeps >= 90% of the rest (the server's log), and
#     the server sees at most burst + rate * t over the run (Redis's clock);
#  2. three batch processes of tenants a, b, c (weights 1, 1, 2) on one
#     100/s key: 25/25/50% of the arrivals while all three run; c stops and
#     comes back: a and b share the key while it is away, and c has its
#     share again once it is back (each within +-15%: see below).
# Starts its own redis-server, stagger serve and proxy on 127.0.0.1 and
# stops them.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  skip "skipped: redis-server or redis-cli missing (make deps)"
[ "${STG_HAVE_REDIS:-}" = 1 ] || skip "skipped: built without Redis support"
scratch limprio
. "$(dirname "$0")/proxy_lib.sh"

. "$(dirname "$0")/redis_lib.sh"
start_redis
LIM="redis://127.0.0.1:$RPORT"

# ---- 1. interactive through a proxy beside a saturating batch ----------------
serve_start srv --log "$T/srv.log"
SPID=$SRV_PID
seq -f "b%04g" 1 400 >"$T/bkeys.txt"
proxy_start px --upstream "http://127.0.0.1:$PORT" --limiter "$LIM/shared" --rate 50 \
  --burst 5 --log "$T/px.log"
t0=$(redis_time)
"$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/bkeys.txt" --db "$T/b.db" \
  --concurrency 30 --priority batch --rate 50 --burst 5 --limiter "$LIM/shared" \
  >"$T/b.out" 2>"$T/b.err" &
BPID=$!
# the batch is saturating the key once 50 of its requests arrived
wait_for sh -c "n=\$(grep -c /track/ '$T/srv.log' 2>/dev/null); [ \"\${n:-0}\" -ge 50 ]" ||
  fail "the batch did not start"
# Redis's round trip, measured beside the interactive client (PINGs)
python3 - "$RPORT" >"$T/rtt.txt" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
rtts = []
for _ in range(150):
    t = time.monotonic()
    s.sendall(b"PING\r\n")
    s.recv(64)
    rtts.append(time.monotonic() - t)
    time.sleep(0.02)
rtts.sort()
print(round(rtts[int(len(rtts) * 0.99) - 1] * 1000, 3))
PY
RTTPID=$!
for i in $(seq 1 30); do
  curl -s -o /dev/null -H 'Stagger-Priority: interactive' "$PX/inter/$i" &
  sleep 0.1 # 10/s: 20% of 50/s
done
wait $RTTPID
set +e; wait $BPID; brc=$?; set -e
t1=$(redis_time)
check "the batch finished (exit $brc): $(cat "$T/b.err")" [ "$brc" = 0 ]
proxy_stop
serve_stop "$SPID"
RTT=$(cat "$T/rtt.txt")
check "interactive admission wait p99 <= 2 emission intervals + the round trip ($RTT ms)" \
  python3 - "$T/px.log" "$RTT" <<'PY'
import json, sys
rtt = float(sys.argv[2])
w = sorted(j["admission_wait_ms"] for j in map(json.loads, open(sys.argv[1]))
           if j.get("event") == "attempt_start" and j.get("class") == "interactive")
p99 = w[max(0, int(len(w) * 0.99) - 1)] if w else None
print("  %d interactive requests, admission wait p50 %s ms, p99 %s ms, max %s ms (bound %.1f ms)"
      % (len(w), w[len(w) // 2] if w else "-", p99, w[-1] if w else "-", 40 + rtt))
sys.exit(0 if len(w) == 30 and p99 <= 40 + rtt else 1)
PY
check "the batch kept >= 90% of what the interactive left; the bound held" \
  python3 - "$T/srv.log" "$t0" "$t1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
inter = sorted(r["t_us"] for r in rows if "/inter/" in r["path"])
track = sorted(r["t_us"] for r in rows if "/track/" in r["path"])
n = len(inter) + len(track)
bound = 5 + 50 * (int(sys.argv[3]) - int(sys.argv[2])) / 1e6
a, b = inter[0], inter[-1]
span = (b - a) / 1e6
batch = sum(1 for t in track if a <= t <= b)
rest = 50 * span - (len(inter) - 1)
print("  %d arrivals, bound %.1f; over the interactive's %.2f s the batch had %d of the %.1f left"
      % (n, bound, span, batch, rest))
sys.exit(0 if n <= bound and batch >= 0.9 * rest else 1)
PY

# ---- 1b. a batch of the default class beside an interactive client ----------
# A process that sees only normal requests reserves ahead as it always did
# (one round trip or a lease's token each); while another process's
# interactive requests ask, Redis refuses it by class, and its engine asks
# again instead of giving the job up ("not admitted before the deadline").
serve_start srv2 --log "$T/srv2.log"
SPID=$SRV_PID
seq -f "n%04g" 1 60 >"$T/nkeys.txt"
proxy_start px2 --upstream "http://127.0.0.1:$PORT" --limiter "$LIM/shared2" --rate 50 \
  --burst 5 --log "$T/px2.log"
( for i in $(seq 1 25); do
    curl -s -o /dev/null -H 'Stagger-Priority: interactive' "$PX/inter/$i" &
    sleep 0.1
  done; wait ) &
IPID=$!
sleep 0.3 # the interactive demand is announced before the batch asks
set +e
"$S" batch -q --url "http://127.0.0.1:$PORT/track/{}" "$T/nkeys.txt" --db "$T/n.db" \
  --concurrency 10 --rate 50 --burst 5 --limiter "$LIM/shared2" >"$T/n.out" 2>"$T/n.err"
nrc=$?
set -e
wait $IPID
proxy_stop
serve_stop "$SPID"
check "a normal batch beside interactive requests finished (exit $nrc): $(head -c 300 "$T/n.err")" \
  [ "$nrc" = 0 ]
jcheck "every job done, none given up" "$("$S" batch report --db "$T/n.db" --json)" \
  'j["states"]["done"] == 60'
check "all 60 reached the server" [ "$(grep -c '/track/n' "$T/srv2.log")" = 60 ]

# ---- 2. tenants 1:1:2, one stopping and coming back --------------------------
serve_start tsrv --log "$T/tsrv.log"
SPID=$SRV_PID
# tenant_run NAME WEIGHT KEYS: one batch process of that tenant (its jobs
# name their tenant and weight in the JSONL input)
tenant_run() {
  seq -f "$1%05g" 1 "$3" | awk -v p="http://127.0.0.1:$PORT/t/$1/" -v t="$1" -v w="$2" \
    '{ printf "{\"url\": \"%s%s\", \"tenant\": \"%s\", \"weight\": %s}\n", p, $1, t, w }' \
    >"$T/$1$3.jsonl"
  "$S" batch -q "$T/$1$3.jsonl" --db "$T/$1$3.db" \
    --concurrency 10 --priority batch --rate 100 --burst 5 \
    --limiter "$LIM/tenants" >"$T/$1$3.out" 2>"$T/$1$3.err" &
}
t0=$(redis_time)
tenant_run a 1 3000 # a and b run until c is done (then they are stopped)
PA=$!
tenant_run b 1 3000
PB=$!
tenant_run c 2 400 # c stops after ~8 s (50 per second: 400 keys)
PC=$!
set +e; wait $PC; crc=$?; set -e
check "tenant c's first run finished (exit $crc)" [ "$crc" = 0 ]
sleep 2
tenant_run c 2 250 # c comes back
PC=$!
set +e; wait $PC; crc=$?; set -e
kill -TERM $PA $PB
set +e; wait $PA; wait $PB; set -e
t1=$(redis_time)
serve_stop "$SPID"
check "tenant c's second run finished (exit $crc)" [ "$crc" = 0 ]
check "tenants 1:1:2 within +-15% of their shares; c's share went to a and b, and came back" \
  python3 - "$T/tsrv.log" "$t0" "$t1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
arr = sorted((r["t_us"], r["path"].split("/")[2]) for r in rows
             if "/t/" in r["path"])
bound = 5 + 100 * (int(sys.argv[3]) - int(sys.argv[2])) / 1e6
ok = len(arr) <= bound
print("  %d arrivals, bound %.1f" % (len(arr), bound))
c = [t for t, n in arr if n == "c"]
# phases: all three (1 s after the start to 0.5 s before c's last arrival
# of its first run: a run's last requests are fewer than its concurrency),
# c away (the gap in c's arrivals, less 0.3 s each side), c back (0.3 s
# after it came back, more than one hold, 80 ms, and a lease window, 40 ms,
# to 0.5 s before the end of its run)
gap_i = max(range(1, len(c)), key=lambda i: c[i] - c[i - 1])
# Each share within +-15% here (first come, first served gives 33% each):
# every process is a whole engine writing SQLite, and on a loaded machine
# one can stall for a while; a stalled tenant asks for nothing, and its
# share flows to the others, as it should. The +-5% of the issue is
# test_redis_prio_fleet.c's, with light processes.
phases = [("all three", arr[0][0] + 1e6, c[gap_i - 1] - 5e5, {"a": .25, "b": .25, "c": .5}, .15),
          ("c away", c[gap_i - 1] + 3e5, c[gap_i] - 3e5, {"a": .5, "b": .5, "c": 0}, .15),
          ("c back", c[gap_i] + 3e5, c[-1] - 5e5, {"a": .25, "b": .25, "c": .5}, .15)]
# c back: the tenant that came back gets its share again, and a and b split
# the other half evenly (they once split it 0.33 / 0.17 for 4 s: a borrower
# took what accrued between a within-share tenant's retry slots; rule 5 of
# docs/priorities.md now leaves it).
for name, a, b, want, tol in phases:
    got = {"a": 0, "b": 0, "c": 0}
    for t, n in arr:
        if a <= t < b:
            got[n] += 1
    tot = sum(got.values())
    line = "  %s (%.1f s): %s of %d" % (name, (b - a) / 1e6,
                                      " ".join("%s %.3f" % (k, v / max(1, tot)) for k, v in got.items()), tot)
    bad = [k for k in got if abs(got[k] / max(1, tot) - want[k]) > tol * max(want[k], .02)]
    print(line + (" NOT within +-%d%% for %s" % (tol * 100, bad) if bad else ""))
    ok = ok and not bad
sys.exit(0 if ok else 1)
PY
finish
