# The standing kill -9 check: one batch of 300 jobs against stagger serve
# (GETs, POSTs with an idempotency key, POSTs without one, a few 404s),
# SIGKILLed 20 times at random moments and re-run after each kill, then run
# to the end. After every kill each job is in exactly one state; at the end
# every idempotent job is done (or failed: its 404), and the server's
# request log shows a job answered more than once only if it was in flight
# (inflight in the database) at a kill, a POST without a key never more
# than once. Kill moments come from STG_TEST_SEED (printed) for a replay.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_kill_loop

# Half the answers trickle for 200 ms: kills land with requests out.
serve_start main --rate 60 --burst 6 --slow-body-prob 0.5 --slow-body-ms 200 --log "$T/srv.log"
SPID=$SRV_PID
N=300
python3 - "$PORT" "$N" >"$T/jobs.jsonl" <<'PY'
import json, sys
port, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    k = "k%03d" % i
    j = {"id": k, "headers": {"X-Client-Id": k}}
    if i % 25 == 0:
        j["url"] = "http://127.0.0.1:%s/status/404" % port
    else:
        j["url"] = "http://127.0.0.1:%s/track/%s" % (port, k)
    if i % 10 == 3:
        j["method"], j["body"] = "POST", "no key " + k
    elif i % 10 == 7:
        j["method"], j["body"], j["idempotency_key"] = "POST", "key " + k, "idem-" + k
    print(json.dumps(j))
PY

run() { exec "$S" batch -q --db "$T/k.db" --concurrency 8 --rate 40 --burst 4 "$T/jobs.jsonl"; }

SEED=${STG_TEST_SEED:-$$}
RANDOM=$SEED
echo "seed $SEED"
: >"$T/inflight.txt"
killed=0
for n in $(seq 1 20); do
  ms=$((60 + RANDOM % 540))
  set +e
  run >/dev/null 2>"$T/run.err" &
  pid=$!
  sleep "$(awk "BEGIN { print $ms / 1000 }")"
  kill -9 "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
  rc=$?
  set -e
  [ "$rc" = 137 ] && killed=$((killed + 1))
  [ -f "$T/k.db" ] || continue
  # Each job in exactly one state; note the jobs in flight at this kill.
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! python3 - "$T/k.db" "$N" "$n" >>"$T/inflight.txt" <<'PY'; then fail "kill $n at $ms ms: the database is whole"; fi
import sqlite3, sys
db, n, kill = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = sqlite3.connect("file:" + db + "?mode=ro", uri=True)
rows = c.execute("SELECT key, state, sent FROM jobs").fetchall()
if not rows:
    sys.exit(0)  # killed before the import committed: nothing yet
states = ("pending", "inflight", "done", "failed", "deferred", "review")
ok = len(rows) == n and len({k for k, _, _ in rows}) == n and all(s in states for _, s, _ in rows)
for k, s, sent in rows:
    if s == "inflight":
        print(kill, k, sent)
sys.exit(0 if ok else 1)
PY
done
echo "killed $killed of 20 runs; jobs in flight at a kill: $(wc -l <"$T/inflight.txt")"
check "at least 15 of 20 kills hit a running batch (got $killed)" [ "$killed" -ge 15 ]

set +e
"$S" batch -q --db "$T/k.db" --concurrency 8 --rate 40 --burst 4 "$T/jobs.jsonl" >/dev/null 2>"$T/final.err"
rc=$?
set -e
serve_stop "$SPID" || true
j=$("$S" batch report --db "$T/k.db" --json)
left=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["states"]["review"] + j["states"]["deferred"])' "$j")
want=1; [ "$left" -gt 0 ] && want=3
check "final run: exit $want (got $rc): $(cat "$T/final.err")" [ "$rc" = "$want" ]
jcheck "final: nothing pending or in flight" "$j" "j['jobs'] == $N and j['states']['pending'] == 0 and j['states']['inflight'] == 0"

TESTS_RUN=$((TESTS_RUN + 1))
if ! python3 - "$T/k.db" "$T/srv.log" "$T/inflight.txt" "$N" <<'PY'; then fail "database, kills and request log agree"; fi
import json, sqlite3, sys
from collections import Counter, defaultdict
db, log, inflight, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ok = True
def bad(msg):
    global ok
    ok = False
    print("mismatch:", msg)
at_kill = Counter()
sent_at_kill = Counter()
for line in open(inflight):
    _, k, sent = line.split()
    at_kill[k] += 1
    sent_at_kill[k] += int(sent)
answers = defaultdict(list)
for line in open(log):
    e = json.loads(line)
    answers[e["client"]].append(e["status"])
c = sqlite3.connect(db)
rows = c.execute("SELECT key, method, idempotency_key, state FROM jobs").fetchall()
if len(rows) != n:
    bad("%d rows" % len(rows))
dups = 0
for k, method, idem, state in rows:
    i = int(k[1:])
    safe = method == "GET" or idem is not None
    want = "failed" if i % 25 == 0 else "done"
    if safe and state != want:
        bad("%s (%s) is %s, want %s" % (k, method, state, want))
    if not safe and state not in ("done", "review", "deferred"):
        bad("%s (POST, no key) is %s" % (k, state))
    if state == "review" and not sent_at_kill[k]:
        bad("%s in review but never in flight and sent at a kill" % k)
    got = answers.get(k, [])
    delivered = [s for s in got if s != 429]
    if state in ("done", "failed") and (200 if want == "done" else 404) not in got:
        bad("%s %s without its answer in the log %s" % (k, state, got))
    if len(delivered) > 1 + at_kill[k]:
        bad("%s answered %d times, in flight at %d kills" % (k, len(delivered), at_kill[k]))
    if not safe and len(delivered) > 1:
        bad("%s (POST, no key) answered %d times" % (k, len(delivered)))
    dups += max(0, len(delivered) - 1)
print("answered more than once: %d jobs-times; review: %d" %
      (dups, sum(1 for r in rows if r[3] == "review")))
sys.exit(0 if ok else 1)
PY

finish
