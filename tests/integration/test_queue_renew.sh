# A queue worker's claims are renewed while it lives (issue #34):
#  - kill -9 of one of three workers with the default --claim-idle (20 s):
#    its jobs (in flight and claimed ahead) are taken over by the others
#    within 30 s of the kill, and every job ends done, once;
#  - a worker stalled by SIGSTOP for longer than --claim-idle, then
#    continued: the other worker took its jobs over; after SIGCONT the
#    stalled one sends none of the jobs the other one sent (only a request
#    already in flight at the stop may reach the server twice), and every
#    job ends in exactly one state.
# Starts its own redis-server and stagger serve on 127.0.0.1. The 30 s is
# the protocol's bound (claim-idle after the last renewal, plus a claim
# poll), not a tuned figure.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
STOP_SIGNAL=KILL
scratch qrenew
. "$(dirname "$0")/queue_lib.sh"
RPORT=$(free_port)
start_redis
R="redis://127.0.0.1:$RPORT"

# pel_of NAME WORKER: how many entries WORKER holds in queue NAME.
pel_of() {
  redis-cli -p "$RPORT" XPENDING "stagger:q:{$1}:jobs" workers - + 100000 "$2" | awk 'NR % 4 == 1' | grep -c . || true
}

# ---- kill -9 of one of three workers ---------------------------------------------------
serve_start k --latency 200ms --log "$T/k.log"
N=200
for i in $(seq $N); do echo "$URL/k/$i"; done >"$T/k.txt"
"$S" batch --queue "$R/kq" --worker a -j 4 --rate 20 --burst 4 --progress none -q "$T/k.txt" \
  >/dev/null 2>"$T/ka.err" &
PA=$!
for _ in $(seq 600); do # a hang guard: until the queue is loaded
  [ "$(redis-cli -p "$RPORT" HGET 'stagger:q:{kq}:meta' total)" = $N ] && break
  sleep 0.05
done
"$S" batch --queue "$R/kq" --worker b -j 4 --rate 20 --burst 4 --progress none -q \
  >/dev/null 2>"$T/kb.err" &
PB=$!
"$S" batch --queue "$R/kq" --worker c -j 4 --rate 20 --burst 4 --progress none -q \
  >/dev/null 2>"$T/kc.err" &
PC=$!
for _ in $(seq 600); do # until c holds jobs (hang guard)
  [ "$(pel_of kq c)" -ge 4 ] && break
  sleep 0.05
done
sleep 1
held=$(pel_of kq c)
kill -9 "$PC"; wait "$PC" 2>/dev/null || true
t_kill=$(date +%s%N)
taken=""
for _ in $(seq 700); do # until c holds nothing (hang guard of 70 s; the bound is checked below)
  if [ "$(pel_of kq c)" = 0 ]; then taken=$(date +%s%N); break; fi
  sleep 0.1
done
check "the killed worker held jobs ($held)" [ "$held" -ge 1 ]
check "its jobs were taken over" [ -n "$taken" ]
[ -n "$taken" ] && {
  ms=$(( (taken - t_kill) / 1000000 ))
  echo "  the killed worker's $held jobs taken over ${ms} ms after the kill (--claim-idle 20s)"
  check "taken over within 30 s of the kill (${ms} ms)" [ "$ms" -le 30000 ]
}
rca=0; wait "$PA" || rca=$?
rcb=0; wait "$PB" || rcb=$?
check "the two live workers end with every job done ($rca $rcb: $(cat "$T/ka.err" "$T/kb.err"))" \
  [ "$rca$rcb" = 00 ]
rep=$("$S" batch report --queue "$R/kq" --json)
jcheck "every job done once" "$rep" "j['states']['done'] == $N and j['jobs'] == $N"
serve_stop "$SRV_PID" || true

# ---- SIGSTOP longer than --claim-idle, then SIGCONT --------------------------------------
serve_start s --latency 300ms --log "$T/s.log"
N=120
for i in $(seq $N); do echo "$URL/s/$i"; done >"$T/s.txt"
IDLE=2s
"$S" batch --queue "$R/sq" --worker st -j 4 --rate 10 --burst 2 --claim-idle $IDLE \
  -H "X-Client-Id: st" --progress none -q "$T/s.txt" >/dev/null 2>"$T/st.err" &
PS=$!
for _ in $(seq 600); do # until st has sent a few (hang guard)
  n=$(grep -c '"/s/' "$T/s.log" 2>/dev/null) || n=0
  [ "$n" -ge 6 ] && break
  sleep 0.05
done
"$S" batch --queue "$R/sq" --worker ot -j 4 --rate 10 --burst 2 --claim-idle $IDLE \
  -H "X-Client-Id: ot" --progress none -q >/dev/null 2>"$T/ot.err" &
PO=$!
sleep 1
kill -STOP "$PS"
stalled=$(pel_of sq st)
# Stalled past --claim-idle: the other worker takes st's jobs over.
for _ in $(seq 300); do # until st holds nothing (hang guard)
  [ "$(pel_of sq st)" = 0 ] && break
  sleep 0.1
done
check "the stalled worker's $stalled jobs were taken over" [ "$(pel_of sq st)" = 0 ]
sleep 1
# The instant of SIGCONT on the server's clock: a marker request just before.
curl -s -o /dev/null -H "X-Client-Id: marker" "$URL/marker" || true
kill -CONT "$PS"
rcs=0; wait "$PS" || rcs=$?
rco=0; wait "$PO" || rco=$?
check "both workers end with every job done ($rcs $rco: $(cat "$T/st.err" "$T/ot.err"))" \
  [ "$rcs$rco" = 00 ]
serve_stop "$SRV_PID" || true # its log is complete once it stopped
rep=$("$S" batch report --queue "$R/sq" --json)
jcheck "every job ended once" "$rep" "j['states']['done'] == $N and j['jobs'] == $N"
check "after SIGCONT, the stalled worker sent no job the other one sent" \
  python3 - "$T/s.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cont = [r["t_us"] for r in rows if r["path"] == "/marker"][0]
rows = [r for r in rows if r["path"] != "/marker"]
by = {}
for r in rows:
    by.setdefault(r["path"], []).append((r["t_us"], r["client"]))
ot = {p for p, v in by.items() if any(c == "ot" for _, c in v)}
late = [p for p, v in by.items() for t, c in v if c == "st" and t >= cont and p in ot]
twice = [p for p, v in by.items() if len(v) > 1]
print(f"  {len(rows)} requests for {len(by)} jobs; sent twice: {len(twice)} (in flight at the"
      f" stop); sent by the stalled worker after SIGCONT and also by the other: {late}")
sys.exit(1 if late else 0)
PY
twice=$(python3 -c '
import json, sys, collections
c = collections.Counter(json.loads(l)["path"] for l in open(sys.argv[1]) if l.strip() and "/marker" not in l)
print(sum(1 for v in c.values() if v > 1))' "$T/s.log")
check "at most the jobs in flight at the stop (4, -j 4) reached the server twice ($twice)" \
  [ "$twice" -le 4 ]

finish
