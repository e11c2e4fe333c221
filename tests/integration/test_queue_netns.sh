# Workers on separate "machines": two network namespaces, each joined to
# this (the Redis host's) namespace by a veth pair, run one worker each
# against one queue, one shared limit and one server. Then machine B
# vanishes (its link is deleted under its running worker): A takes B's jobs
# after --claim-idle and finishes; B, cut off, exits 6 with nothing lost.
# Every job ends done, once; the server never sees more than burst + rate * t.
#
# Needs root and ip(8); skipped with a message otherwise. Everything it
# creates (namespaces, links) carries this run's pid and is removed on exit.
# The addresses are private ones on links that exist only on this machine.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  skip "skipped: network namespaces need root and ip(8) (run as root to test workers on separate machines)"
fi
ID=$$
NA="stgqa$ID"; NB="stgqb$ID"
VA="sqa$ID"; VB="sqb$ID"           # host ends; the namespace ends are ${VA}n, ${VB}n
X=$((ID % 250 + 1))
HA="10.233.$X.1"; A2="10.233.$X.2"; HB="10.234.$X.1"; B2="10.234.$X.2"
T=$(mktemp -d /tmp/stg_qnetns.XXXXXX)
cleanup() {
  [ "$BASHPID" = "$$" ] || return 0
  for p in $(jobs -rp); do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  ip link del "$VA" 2>/dev/null || true
  ip link del "$VB" 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"
. "$(dirname "$0")/queue_lib.sh"

machine() { # machine NS HOSTEND HOSTIP NSIP
  ip netns add "$1"
  ip link add "$2" type veth peer name "${2}n"
  ip link set "${2}n" netns "$1"
  ip addr add "$3/30" dev "$2"
  ip link set "$2" up
  ip netns exec "$1" ip addr add "$4/30" dev "${2}n"
  ip netns exec "$1" ip link set "${2}n" up
  ip netns exec "$1" ip link set lo up
  ip netns exec "$1" ip route add default via "$3"
}
machine "$NA" "$VA" "$HA" "$A2"
machine "$NB" "$VB" "$HB" "$B2"

RPORT=$(free_port)
start_redis --bind "127.0.0.1 $HA" --protected-mode no
# (serve_start expects 127.0.0.1: started here, stopped by serve_stop.)
"$S" serve --port 0 --bind "$HA" --rate 50 --log "$T/srv.log" >"$T/srv.out" 2>"$T/srv.err" &
SPID=$!
for _ in $(seq 600); do [ -s "$T/srv.out" ] && break; sleep 0.05; done
PORT=$(sed -n '1s|^listening on http://.*:\([0-9]*\)$|\1|p' "$T/srv.out")
[ -n "$PORT" ] || { echo "FAIL: the server did not start: $(cat "$T/srv.err")" >&2; exit 1; }
SURL="http://$HA:$PORT"
check "machine B reaches the server through the Redis host" \
  ip netns exec "$NB" "$S" fetch -o /dev/null "$SURL/ping"
N=300; RATE=50; BURST=5
for i in $(seq $N); do echo "$SURL/item/$i"; done >"$T/in.txt"
Q="redis://$HA:$RPORT/netns"
work() { # work NS NAME [ARGS]
  _ns=$1; _w=$2; shift 2
  ip netns exec "$_ns" "$S" batch --queue "$Q" --worker "$_w" -j 5 --rate $RATE --burst $BURST \
    --claim-idle 4s --deadline 3s --queue-wait 3s --progress none "$@" \
    >"$T/$_w.out" 2>"$T/$_w.err" &
  WPID=$!
}
t0=$(redis_time)
work "$NA" a "$T/in.txt"; PA=$WPID
wait_grep "$T/a.err" "jobs loaded into queue"
work "$NB" b; PB=$WPID
wait_lines "$T/srv.log" 120
ip link del "$VB"   # machine B vanishes from the network
rc=0; wait "$PA" || rc=$?
check "machine A finishes the queue: exit $rc" [ "$rc" = 0 ]
t1=$(redis_time)
rc=0; wait "$PB" || rc=$?
check "machine B, cut off, exits 6: $rc ($(tail -n 1 "$T/b.err"))" [ "$rc" = 6 ]
serve_stop "$SPID" || true
jcheck "both machines did jobs; all done" "$("$S" batch report --queue "redis://127.0.0.1:$RPORT/netns" --json)" \
  'j["states"]["done"] == 300 and all(w["done"] > 0 for w in j["workers"]) and len(j["workers"]) == 2'
"$S" batch export --queue "redis://127.0.0.1:$RPORT/netns" >"$T/export.jsonl"
check "every job once, done" python3 - "$T/export.jsonl" $N <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(rows) == int(sys.argv[2]) and len({r["job"] for r in rows}) == len(rows)
         and all(r["state"] == "done" for r in rows) else 1)
PY
check "the server saw at most burst + rate * t of Redis time" python3 - "$T/srv.log" $t0 $t1 $RATE $BURST <<'PY'
import sys
n = sum(1 for l in open(sys.argv[1]) if '"/item/' in l)  # (the ping is not a job)
t0, t1, rate, burst = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
bound = burst + rate * (t1 - t0) / 1e6
print(f"  {n} requests over {(t1 - t0) / 1e6:.1f} s of Redis time; bound {bound:.0f}")
sys.exit(0 if n <= bound else 1)
PY
finish
