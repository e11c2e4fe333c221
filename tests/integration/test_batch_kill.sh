# `stagger batch` killed with SIGKILL at random moments, several times, then
# run to the end: every key ends done, failed or deferred exactly once, as
# the database and the server's request log both show; re-sends are bounded
# by the jobs that were in flight at each kill (at-least-once).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_batch_kill.XXXXXX)
SRV_PID=""
cleanup() {
  # Only the script itself: a forked child that gets a signal before its
  # exec runs this trap too, and must not remove $T under the script.
  [ "$BASHPID" = "$$" ] || return 0
  [ -n "$SRV_PID" ] && { kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; }
  rm -rf "$T"
}
trap cleanup EXIT
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"

# serve_start waits for the server's "listening" line (srv.out exists by
# then); it sets SRV_PID and PORT.
serve_start srv --rate 250 --burst 10 --log "$T/srv.log"

# 400 jobs; X-Client-Id names each in the server log. Every 40th key gets a
# 404 (failed), every 57th a 503 asking for 100 s (deferred at once).
N=400
python3 - "$PORT" "$N" >"$T/jobs.jsonl" <<'EOF'
import json, sys
port, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    k = "k%03d" % i
    if i % 40 == 0:
        path = "/status/404"
    elif i % 57 == 0:
        path = "/status/503?retry_after=100"
    else:
        path = "/track/" + k
    print(json.dumps({"id": k, "url": "http://127.0.0.1:%s%s" % (port, path),
                      "headers": {"X-Client-Id": k}}))
EOF

# (exec: the background job must be the batch itself, not a subshell around it)
run() { exec "$S" batch -q --db "$T/k.db" --rate 150 --burst 10 "$T/jobs.jsonl"; }

# Kill points in ms, random but printed; the first lands during start-up
# (input parse, import), the others mid-run.
RANDOM=${STG_TEST_SEED:-$$}
points="$((20 + RANDOM % 60))"
for _ in 1 2 3 4 5; do points="$points $((150 + RANDOM % 450))"; done
echo "kill points (ms): $points"
killed=0
for ms in $points; do
  set +e
  run >/dev/null 2>"$T/run.err" &
  pid=$!
  sleep "$(awk "BEGIN { print $ms / 1000 }")"
  kill -9 "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
  rc=$?
  set -e
  [ "$rc" = 137 ] && killed=$((killed + 1))
  # Between kills the database is always consistent: no job is lost or doubled.
  if [ -f "$T/k.db" ]; then
    j=$("$S" batch report --db "$T/k.db" --json 2>/dev/null || echo '{"jobs": 0}')
    jcheck "after kill at $ms ms: 0 or $N jobs, states add up" "$j" \
      "j['jobs'] in (0, $N) and sum(j.get('states', {}).values()) == j['jobs']"
  fi
done
check "at least 4 of 6 kills hit a running batch (got $killed)" [ "$killed" -ge 4 ]

set +e
(run) >/dev/null 2>"$T/final.err"
rc=$?
set -e
check "final run: exit 3 (deferred jobs left), got $rc: $(cat "$T/final.err")" [ "$rc" = 3 ]
kill "$SRV_PID"; wait "$SRV_PID" 2>/dev/null || true; SRV_PID=""

n404=$((N / 40))
n503=$(python3 -c "print(sum(1 for i in range(1, $N + 1) if i % 57 == 0 and i % 40 != 0))")
j=$("$S" batch report --db "$T/k.db" --json)
jcheck "every job final" "$j" \
  "j['jobs'] == $N and j['states']['failed'] == $n404 and j['states']['deferred'] == $n503 and j['states']['done'] == $N - $n404 - $n503 and j['states']['pending'] == j['states']['inflight'] == j['states']['review'] == 0"
# Every launch may make a row (one killed during start-up may not): the
# killed ones, one that finished before its kill point, and the final run.
launched=$(( $(echo $points | wc -w) + 1 ))
jcheck "a run row per run that got going" "$j" "2 <= j['runs'] <= $launched"

"$S" batch export --db "$T/k.db" >"$T/export.jsonl"
TESTS_RUN=$((TESTS_RUN + 1))
if ! python3 - "$T/export.jsonl" "$T/srv.log" "$T/k.db" "$N" "$killed" <<'EOF'; then fail "database and request log agree"; fi
import json, sqlite3, sys
from collections import Counter, defaultdict
export, log, db, n, kills = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = [json.loads(l) for l in open(export)]
keys = ["k%03d" % i for i in range(1, n + 1)]
ok = True
def bad(msg):
    global ok
    ok = False
    print("mismatch:", msg)
# the export: each key exactly once, in a final state
c = Counter(r["id"] for r in rows)
if sorted(c) != keys or max(c.values()) != 1:
    bad("export keys")
# the database itself
con = sqlite3.connect(db)
dbrows = con.execute("SELECT key, state FROM jobs").fetchall()
if len(dbrows) != n or len({k for k, _ in dbrows}) != n:
    bad("db keys")
if any(s not in ("done", "failed", "deferred") for _, s in dbrows):
    bad("db states")
# the server's log: what each key got
answers = defaultdict(list)
for l in open(log):
    e = json.loads(l)
    answers[e["client"]].append(e["status"])
for r in rows:
    k, st = r["id"], r["state"]
    i = int(k[1:])
    want = "failed" if i % 40 == 0 else "deferred" if i % 57 == 0 else "done"
    if st != want:
        bad("%s is %s, want %s" % (k, st, want))
    got = answers.get(k, [])
    final = [s for s in got if s != 429]
    if not final:
        bad("%s never answered by the server" % k)
    if want == "done" and 200 not in got:
        bad("%s done without a 200 in the log" % k)
    if r["status"] not in final:
        bad("%s: status %s not in the log %s" % (k, r["status"], got))
# at-least-once: re-sends only for jobs in flight at a kill (<= 30 each)
resent = sum(len([s for s in v if s != 429]) - 1 for v in answers.values())
print("jobs answered more than once:", resent, "kills:", kills)
if resent > 30 * (kills + 1):
    bad("too many re-sends: %d" % resent)
sys.exit(0 if ok else 1)
EOF

finish
