# A failover in the middle of a queue run (issue #34): a primary with a
# replica, the workers reaching the primary through an endpoint that moves
# (redis_forward.py, standing for a managed service's primary endpoint);
# the primary is killed with SIGKILL mid-run, the replica promoted
# (REPLICAOF NO ONE) and the endpoint moved to it. The workers reconnect,
# load their scripts there, and every job ends in exactly one state (done):
# writes the replica had not received when the primary died are redone
# (jobs whose outcome was lost run again after --claim-idle), never
# recorded twice. Then the old primary comes back as a replica of the new
# one behind the endpoint: READONLY is an outage, not a failure.
# Starts its own redis-servers, forwarder and stagger serve on 127.0.0.1.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch qfail
. "$(dirname "$0")/queue_lib.sh"

redis_pair # PP, RP, PRIMARY (queue_lib.sh)
echo "$PP" >"$T/target"
python3 "$(dirname "$0")/redis_forward.py" "$T/target" >"$T/fwd.out" 2>"$T/fwd.err" &
EP=$(listen_port "$T/fwd.out" $!)
[ -n "$EP" ] || { echo "forwarder did not start: $(cat "$T/fwd.err")" >&2; exit 1; }
E="redis://127.0.0.1:$EP/fq"

serve_start up --latency 100ms --log "$T/up.log"
N=200
for i in $(seq $N); do echo "$URL/f/$i"; done >"$T/f.txt"
"$S" batch --queue "$E" --worker a -j 4 --rate 40 --burst 4 --claim-idle 3s --progress none \
  -q "$T/f.txt" >/dev/null 2>"$T/a.err" &
PA=$!
for _ in $(seq 600); do # hang guard: until the queue is loaded
  [ "$(redis-cli -p "$PP" HGET 'stagger:q:{fq}:meta' total)" = "$N" ] && break
  sleep 0.05
done
"$S" batch --queue "$E" --worker b -j 4 --rate 40 --burst 4 --claim-idle 3s --progress none \
  -q >/dev/null 2>"$T/b.err" &
PB=$!
wait_lines "$T/up.log" 60
before=$(redis-cli -p "$PP" HGET 'stagger:q:{fq}:counts' done)
kill -9 "$PRIMARY"; wait "$PRIMARY" 2>/dev/null || true
redis-cli -p "$RP" replicaof no one >/dev/null
echo "$RP" >"$T/target"
echo "  primary killed after ${before:-0} jobs done; replica promoted, endpoint moved"
# The old primary comes back, as a replica of the new one, behind the
# endpoint for a moment: a worker that reaches it gets READONLY.
sleep 1
redis-server --port "$PP" --bind 127.0.0.1 --save '' --appendonly no --dir "$T" \
  --replicaof 127.0.0.1 "$RP" --daemonize no >"$T/p2.out" 2>&1 &
for _ in $(seq 200); do [ "$(redis-cli -p "$PP" ping 2>/dev/null)" = PONG ] && break; sleep 0.05; done
echo "$PP" >"$T/target"
sleep 1
echo "$RP" >"$T/target"
rca=0; wait "$PA" || rca=$?
rcb=0; wait "$PB" || rcb=$?
check "both workers end with every job done after the failover ($rca $rcb: $(cat "$T/a.err" "$T/b.err" | tail -4))" \
  [ "$rca$rcb" = 00 ]
rep=$("$S" batch report --queue "redis://127.0.0.1:$RP/fq" --json 2>"$T/rep.err" || echo '{}')
jcheck "every job in exactly one state, done" "$rep" \
  "j['jobs'] == $N and j['states']['done'] == $N and sum(j['states'].values()) == $N"
"$S" batch export --queue "redis://127.0.0.1:$RP/fq" >"$T/export.jsonl" 2>/dev/null || true
check "the export has each job once, done" python3 - "$T/export.jsonl" "$N" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ids = collections.Counter(r["id"] for r in rows)
states = collections.Counter(r["state"] for r in rows)
print(f"  {len(rows)} rows, {len(ids)} jobs, states {dict(states)}")
sys.exit(0 if len(ids) == int(sys.argv[2]) == len(rows) and states == {"done": len(rows)} else 1)
PY
log_count "$T/up.log" '"/f/' $N
check "every job reached the server (at least once)" python3 - "$T/up.log" "$N" <<'PY'
import json, sys, collections
c = collections.Counter(json.loads(l)["path"] for l in open(sys.argv[1]) if l.strip() and '"/f/' in l)
print(f"  {len(c)} jobs sent, {sum(c.values())} requests ({sum(1 for v in c.values() if v > 1)} sent again after the failover)")
sys.exit(0 if len(c) == int(sys.argv[2]) else 1)
PY

# ---- a graceful switchover: the primary demoted under running workers --------------
# The restarted old primary (a replica now) is promoted, the current primary
# made its replica while the workers' connections to it stay open: their
# next scripts answer READONLY, which is an outage (reconnect), not a
# failed script.
for _ in $(seq 200); do # hang guard: until the replica is in sync
  redis-cli -p "$PP" info replication | grep -q 'master_link_status:up' && break
  sleep 0.05
done
for i in $(seq $N); do echo "$URL/g/$i"; done >"$T/g.txt"
E2="redis://127.0.0.1:$EP/gq"
"$S" batch --queue "$E2" --worker c -j 4 --rate 40 --burst 4 --claim-idle 3s --progress none \
  -q "$T/g.txt" >/dev/null 2>"$T/c.err" &
PC=$!
wait_lines "$T/up.log" $((N + 60))
for _ in $(seq 200); do # until the replica has the queue (hang guard)
  [ "$(redis-cli -p "$PP" exists 'stagger:q:{gq}:jobs')" = 1 ] && break
  sleep 0.05
done
redis-cli -p "$PP" replicaof no one >/dev/null
redis-cli -p "$RP" replicaof 127.0.0.1 "$PP" >/dev/null
sleep 0.5
echo "$PP" >"$T/target"
rcc=0; wait "$PC" || rcc=$?
check "the worker rides out its primary's demotion ($rcc: $(tail -3 "$T/c.err"))" [ "$rcc" = 0 ]
check "it saw READONLY as an outage" grep -q "READONLY\|cannot take writes\|unreachable" "$T/c.err"
rep=$("$S" batch report --queue "redis://127.0.0.1:$PP/gq" --json 2>/dev/null || echo '{}')
jcheck "every job of the second queue done once" "$rep" \
  "j['jobs'] == $N and j['states']['done'] == $N and sum(j['states'].values()) == $N"

finish
