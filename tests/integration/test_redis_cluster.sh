# Redis Cluster (issue #34): three primaries started by the test on
# 127.0.0.1 (`redis-server --cluster-enabled yes` x 3, `redis-cli --cluster
# create`), and:
#  - the shared limit, given each process a different node's URL (so MOVED
#    is followed to the node of the key's slot), holds burst + rate x t for
#    two processes together;
#  - a queue worked by two workers through different nodes finishes every
#    job exactly once while the queue's slot is migrated to another node in
#    the middle of the run (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE,
#    SETSLOT NODE: the workers see ASK, TRYAGAIN, then MOVED).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch rcluster
. "$(dirname "$0")/queue_lib.sh"

# cluster_ports: three free ports whose cluster bus ports (+10000) are free too.
cluster_ports() {
  python3 -c '
import random, socket
got = []
while len(got) < 3:
    p = random.randint(20000, 45000)
    ok = True
    for q in (p, p + 10000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", q))
        except OSError:
            ok = False
        s.close()
    if ok and p not in got:
        got.append(p)
print(*got)'
}
read -r P1 P2 P3 <<EOF_PORTS
$(cluster_ports)
EOF_PORTS
for p in $P1 $P2 $P3; do
  mkdir -p "$T/n$p"
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file "$T/n$p/nodes.conf" --cluster-node-timeout 3000 --save '' \
    --appendonly no --dir "$T/n$p" --daemonize no >"$T/n$p/out" 2>&1 &
done
for p in $P1 $P2 $P3; do
  for _ in $(seq 200); do [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break; sleep 0.05; done
done
redis-cli --cluster create 127.0.0.1:$P1 127.0.0.1:$P2 127.0.0.1:$P3 --cluster-yes \
  >"$T/create.out" 2>&1 || { echo "redis-cli --cluster create failed: $(tail -3 "$T/create.out")" >&2; exit 1; }
for p in $P1 $P2 $P3; do
  for _ in $(seq 200); do # hang guard: until every node sees the cluster up
    redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' && break
    sleep 0.05
  done
done
# owner SLOT: the port of the node serving SLOT.
owner() {
  redis-cli -p "$P1" cluster nodes | python3 -c '
import sys
slot = int(sys.argv[1])
for line in sys.stdin:
    f = line.split()
    if "master" not in f[2]:
        continue
    for r in f[8:]:
        if r.startswith("["):
            continue
        lo, _, hi = r.partition("-")
        if int(lo) <= slot <= int(hi or lo):
            print(f[1].split("@")[0].rsplit(":", 1)[1]); sys.exit(0)
sys.exit(1)' "$1"
}
nodeid() { redis-cli -p "$1" cluster myid; }

serve_start up --log "$T/up.log"

# ---- the shared limit across nodes ------------------------------------------------
N=40
for i in $(seq $N); do echo "$URL/a/$i"; done >"$T/a.txt"
for i in $(seq $N); do echo "$URL/b/$i"; done >"$T/b.txt"
t0=$(redis-cli -p "$P1" time | tr -d '\r' | { read -r a; read -r b; echo $((a * 1000000 + b)); })
"$S" batch "$T/a.txt" --db "$T/a.db" --limiter "redis://127.0.0.1:$P1/clkey" --rate 40 \
  --burst 4 -j 4 --progress none -q >/dev/null 2>"$T/a.err" &
PA=$!
rc=0
"$S" batch "$T/b.txt" --db "$T/b.db" --limiter "redis://127.0.0.1:$P2/clkey" --rate 40 \
  --burst 4 -j 4 --progress none -q >/dev/null 2>"$T/b.err" || rc=$?
rca=0; wait "$PA" || rca=$?
t1=$(redis-cli -p "$P1" time | tr -d '\r' | { read -r a; read -r b; echo $((a * 1000000 + b)); })
check "two processes through two nodes: every job done ($rca $rc: $(cat "$T/a.err" "$T/b.err"))" \
  [ "$rca$rc" = 00 ]
log_count "$T/up.log" '"/[ab]/' 80
check "the shared limit held across the cluster (2 x $N within burst + rate x t of Redis time)" \
  python3 - "$T/up.log" "$t0" "$t1" <<'PY'
import json, sys
got = sum(1 for l in open(sys.argv[1]) if l.strip())
t = (int(sys.argv[3]) - int(sys.argv[2])) / 1e6
print(f"  {got} requests in {t:.2f} s of Redis time (one machine: one clock); bound 4 + 40 x t = {4 + 40 * t:.1f}")
sys.exit(0 if got == 80 and 80 <= 4 + 40 * t else 1)
PY
evals=0
for p in $P1 $P2 $P3; do
  e=$(redis-cli -p "$p" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
  [ "${e:-0}" -ge 80 ] && evals=$((evals + 1))
done
check "the decisions ran in the cluster, on the key's node ($evals node(s) with >= 80 EVALSHA)" \
  [ "$evals" -ge 1 ]

# ---- the queue, its slot migrated in the middle --------------------------------------
SLOT=$(redis-cli -p "$P1" cluster keyslot '{cq}')
SRC=$(owner "$SLOT")
for p in $P1 $P2 $P3; do [ "$p" != "$SRC" ] && DST=$p && break; done
echo "  queue slot $SLOT on :$SRC, migrated to :$DST mid-run"
N=240
for i in $(seq $N); do echo "$URL/q/$i"; done >"$T/q.txt"
"$S" batch --queue "redis://127.0.0.1:$P1/cq" --worker w1 -j 4 --rate 40 --burst 4 \
  --progress none -q "$T/q.txt" >/dev/null 2>"$T/w1.err" &
PW1=$!
for _ in $(seq 600); do # hang guard: until the queue is loaded
  [ "$(redis-cli -p "$SRC" HGET 'stagger:q:{cq}:meta' total)" = "$N" ] && break
  sleep 0.05
done
"$S" batch --queue "redis://127.0.0.1:$P2/cq" --worker w2 -j 4 --rate 40 --burst 4 \
  --progress none -q >/dev/null 2>"$T/w2.err" &
PW2=$!
wait_lines "$T/up.log" 140
SID=$(nodeid "$SRC"); DID=$(nodeid "$DST")
redis-cli -p "$DST" cluster setslot "$SLOT" importing "$SID" >/dev/null
redis-cli -p "$SRC" cluster setslot "$SLOT" migrating "$DID" >/dev/null
sleep 0.5
migrate_all() {
  keys=$(redis-cli -p "$SRC" cluster getkeysinslot "$SLOT" 1000)
  [ -z "$keys" ] && return 1
  # shellcheck disable=SC2086
  redis-cli -p "$SRC" migrate 127.0.0.1 "$DST" "" 0 5000 keys $keys >/dev/null
}
migrate_all || true
sleep 0.5 # the workers now run on the target through ASK
while migrate_all; do :; done
for p in $P1 $P2 $P3; do redis-cli -p "$p" cluster setslot "$SLOT" node "$DID" >/dev/null; done
rc1=0; wait "$PW1" || rc1=$?
rc2=0; wait "$PW2" || rc2=$?
check "both workers end with every job done ($rc1 $rc2: $(cat "$T/w1.err" "$T/w2.err"))" \
  [ "$rc1$rc2" = 00 ]
asks=$(redis-cli -p "$DST" info commandstats | sed -n 's/^cmdstat_asking:calls=\([0-9]*\).*/\1/p')
check "the workers followed ASK to the target during the migration (${asks:-0} ASKING)" \
  [ "${asks:-0}" -ge 1 ]
check "the queue now lives on the target node" \
  [ "$(redis-cli -p "$DST" exists 'stagger:q:{cq}:jobs')" = 1 ]
rep=$("$S" batch report --queue "redis://127.0.0.1:$P3/cq" --json 2>"$T/rep.err" || echo '{}')
jcheck "every job ended once, done" "$rep" "j['states']['done'] == $N and j['jobs'] == $N"
serve_stop "$SRV_PID" || true # its log is complete once it stopped
check "each job reached the server exactly once" python3 - "$T/up.log" "$N" <<'PY'
import json, sys, collections
c = collections.Counter(json.loads(l)["path"] for l in open(sys.argv[1]) if l.strip() and '"/q/' in l)
print(f"  {len(c)} jobs sent, {sum(c.values())} requests")
sys.exit(0 if len(c) == int(sys.argv[2]) and all(v == 1 for v in c.values()) else 1)
PY

finish
