# Redis Sentinel (issue #34): a primary, its replica and one sentinel
# (redis-server --sentinel, quorum 1), all started by the test on
# 127.0.0.1. Two queue workers find the primary through the sentinel
# (--redis-sentinel, --redis-sentinel-master; the URL's host:port is a
# dead one on purpose); the primary is killed with SIGKILL mid-run, the
# sentinel promotes the replica, the workers ask it again and carry on:
# every job ends done, exactly once. Also: the options go together.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch rsent
. "$(dirname "$0")/queue_lib.sh"

redis_pair # PP, RP, PRIMARY (queue_lib.sh)
SP=$(free_port)
cat >"$T/sentinel.conf" <<EOF
port $SP
bind 127.0.0.1
dir $T
sentinel monitor m 127.0.0.1 $PP 1
sentinel down-after-milliseconds m 1000
sentinel failover-timeout m 4000
EOF
redis-server "$T/sentinel.conf" --sentinel >"$T/s.out" 2>&1 &
for _ in $(seq 400); do # hang guard: until the sentinel knows the replica
  [ "$(redis-cli -p "$SP" sentinel replicas m 2>/dev/null | grep -c "$RP")" -ge 1 ] && break
  sleep 0.05
done
check "the sentinel knows the primary's replica" \
  sh -c "redis-cli -p $SP sentinel replicas m | grep -q $RP"

DEAD=$(free_port) # nothing listens there: the URL's address is not used
Q="redis://127.0.0.1:$DEAD/sq"
SEN="--redis-sentinel 127.0.0.1:$SP --redis-sentinel-master m"

expect_exit "--redis-sentinel without --redis-sentinel-master" 2 \
  "$S" batch report --queue "$Q" --redis-sentinel "127.0.0.1:$SP"
expect_exit "a sentinel that does not know the name: exit 6" 6 \
  "$S" batch report --queue "$Q" --redis-sentinel "127.0.0.1:$SP" --redis-sentinel-master nope

serve_start up --latency 100ms --log "$T/up.log"
N=160
for i in $(seq $N); do echo "$URL/s/$i"; done >"$T/s.txt"
# shellcheck disable=SC2086
"$S" batch --queue "$Q" $SEN --worker a -j 4 --rate 40 --burst 4 --claim-idle 3s \
  --progress none -q "$T/s.txt" >/dev/null 2>"$T/a.err" &
PA=$!
for _ in $(seq 600); do # hang guard: until the queue is loaded
  [ "$(redis-cli -p "$PP" HGET 'stagger:q:{sq}:meta' total)" = "$N" ] && break
  sleep 0.05
done
# shellcheck disable=SC2086
"$S" batch --queue "$Q" $SEN --worker b -j 4 --rate 40 --burst 4 --claim-idle 3s \
  --progress none -q >/dev/null 2>"$T/b.err" &
PB=$!
wait_lines "$T/up.log" 40
for _ in $(seq 200); do # until the replica has the queue (hang guard)
  [ "$(redis-cli -p "$RP" exists 'stagger:q:{sq}:jobs')" = 1 ] && break
  sleep 0.05
done
kill -9 "$PRIMARY"; wait "$PRIMARY" 2>/dev/null || true
rca=0; wait "$PA" || rca=$?
rcb=0; wait "$PB" || rcb=$?
check "the sentinel promoted the replica" \
  sh -c "redis-cli -p $SP sentinel get-master-addr-by-name m | grep -qx $RP"
check "both workers end with every job done after the failover ($rca $rcb: $(tail -n 3 "$T/a.err" "$T/b.err"))" \
  [ "$rca$rcb" = 00 ]
# shellcheck disable=SC2086
rep=$("$S" batch report --queue "$Q" $SEN --json 2>"$T/rep.err" || echo '{}')
jcheck "every job in exactly one state, done" "$rep" \
  "j['jobs'] == $N and j['states']['done'] == $N and sum(j['states'].values()) == $N"

finish
