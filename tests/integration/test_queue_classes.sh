#!/usr/bin/env bash
# Issue #32 in the Redis work queue: `batch report --queue` shows the jobs
# by state per class and tenant (each job's Stagger-Priority/-Tenant when it
# was loaded) and what the workers admitted of each with their waits for
# admission (each worker adds its engine's counts when it stops), in the
# database report's rows and JSON ("classes"). Two workers on one queue;
# counts are compared with the input's, no timing is asserted.
# Starts its own redis-server and stagger serve on 127.0.0.1.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch qclass
. "$(dirname "$0")/queue_lib.sh"
RPORT=$(free_port)
start_redis
R="redis://127.0.0.1:$RPORT"

serve_start main
python3 - "$T/jobs.jsonl" "$URL" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(60):
        j = {"id": "j%d" % i, "url": "%s/c/%d" % (sys.argv[2], i)}
        if i % 3 == 0:
            j.update(priority="interactive", tenant="acme")
        elif i % 3 == 1:
            j.update(priority="batch", tenant="beta", weight=2)
        f.write(json.dumps(j) + "\n")   # i % 3 == 2: no class, no tenant
PY
# a is slow (10/s), so b, at full speed, takes its share of the jobs.
"$S" batch --queue "$R/cls" --worker a -j 2 --rate 10 --burst 1 --progress none "$T/jobs.jsonl" \
  >/dev/null 2>"$T/a.err" &
PA=$!
wait_grep "$T/a.err" "jobs loaded into queue"
rc=0
"$S" batch --queue "$R/cls" --worker b -j 2 --rate 0 --progress none -q >/dev/null \
  2>"$T/b.err" || rc=$?
check "worker b ends with exit 0: $rc $(cat "$T/b.err")" [ "$rc" = 0 ]
rc=0; wait "$PA" || rc=$?
check "worker a ends with exit 0: $rc $(cat "$T/a.err")" [ "$rc" = 0 ]
serve_stop "$SRV_PID" || true

"$S" batch report --queue "$R/cls" --json >"$T/report.json"
check "report --json: jobs per class and tenant as in the input, admitted as sent" \
  python3 - "$T/report.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cls = j["classes"]
jobs = {(c["class"], c["tenant"]): c["jobs"] for c in cls if "jobs" in c}
adm = {(c["class"], c["tenant"]): c for c in cls if "admitted" in c}
print("  jobs:", jobs)
print("  admitted:", {k: v["admitted"] for k, v in adm.items()})
want = {("interactive", "acme"): 20, ("batch", "beta"): 20, (None, None): 20}
ok = set(jobs) == set(want) and all(
    jobs[k]["done"] == n and sum(jobs[k].values()) == n for k, n in want.items())
# the jobs that named none ran as the default class, normal
wadm = {("interactive", "acme"): 20, ("batch", "beta"): 20, ("normal", None): 20}
ok = ok and {k: v["admitted"] for k, v in adm.items()} == wadm
ok = ok and all(v["wait_max_ms"] >= 0 and v["wait_ms"] >= 0 for v in adm.values())
ok = ok and j["states"]["done"] == 60
ok = ok and len(j["workers"]) == 2 and all(w["done"] > 0 for w in j["workers"])
sys.exit(0 if ok else 1)
PY
check "each worker added its admissions once" \
  [ "$(redis-cli -p "$RPORT" SCARD 'stagger:q:{cls}:cadded')" = 2 ]
"$S" batch report --queue "$R/cls" >"$T/report.txt"
check "report: jobs by class and tenant" grep -q "^jobs by class and tenant:" "$T/report.txt"
check "report: a row per class and tenant with its states" \
  grep -Eq "^  interactive +acme +done 20$" "$T/report.txt"
check "report: the jobs that named none" grep -Eq "^  \(default\) +- +done 20$" "$T/report.txt"
check "report: admitted by class and tenant" \
  grep -q "^admitted by class and tenant (every run):" "$T/report.txt"
check "report: admitted row" \
  grep -Eq "^  batch +beta +20 admitted, wait for admission avg [0-9.]+ ms, max [0-9]+ ms$" \
  "$T/report.txt"

# A queue loaded by an older stagger: entries without the fields c and t
# (and no counters) read as no section; their outcomes count as the default.
redis-cli -p "$RPORT" HSET 'stagger:q:{old}:meta' fp "$(printf 'a%.0s' $(seq 64))" total 1 \
  >/dev/null
redis-cli -p "$RPORT" XADD 'stagger:q:{old}:jobs' '*' id 1 key k m GET u "$URL/x" h '' hb 0 \
  b '' k '' rs 1 ln 1 >/dev/null
"$S" batch report --queue "$R/old" --json >"$T/old.json"
jcheck "an old queue reads: no class rows" "$(cat "$T/old.json")" 'j["classes"] == []'

# run_queue NAME INPUT [ARGS...]: one worker on queue NAME over INPUT until
# the queue ends (checked: exit 0); then the server stops.
run_queue() {
  _q=$1 _in=$2
  shift 2
  rc=0
  "$S" batch --queue "$R/$_q" --rate 0 --progress none -q "$@" "$_in" >/dev/null \
    2>"$T/$_q.err" || rc=$?
  check "the run of queue $_q ends 0: $rc $(cat "$T/$_q.err")" [ "$rc" = 0 ]
  serve_stop "$SRV_PID" || true
}

# A queue of jobs without classes: no section (nothing to tell apart).
serve_start plain
for i in $(seq 5); do echo "$URL/p/$i"; done >"$T/p.txt"
run_queue plain "$T/p.txt" -j 2
jcheck "no class rows when no job names one" \
  "$("$S" batch report --queue "$R/plain" --json)" 'j["classes"] == [] and j["states"]["done"] == 5'
check "and no section in the text" sh -c "! \"$S\" batch report --queue '$R/plain' | grep -q 'by class'"
# The queue's order (docs/queue.md "Order"): 40 batch jobs before 10
# interactive ones in the input; one worker with one slot (a claim of one or
# two jobs at a time) sends the 10 interactive first, not first in, first
# out; each class is a lane of its own in Redis.
serve_start order --log "$T/order.csv" --log-format csv
python3 - "$T/order.jsonl" "$URL" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(50):
        p = "batch" if i < 40 else "interactive"
        f.write(json.dumps({"id": "o%d" % i, "url": "%s/o/%s/%d" % (sys.argv[2], p, i),
                            "priority": p}) + "\n")
PY
run_queue order "$T/order.jsonl" -j 1
check "two lanes: interactive and batch" \
  [ "$(redis-cli -p "$RPORT" HGET 'stagger:q:{order}:lanes' n)" = 2 ]
check "the 10 interactive jobs among the first 11 sent, each job once" \
  python3 - "$T/order.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0].isdigit()]
rows.sort(key=lambda r: int(r[0]))
paths = [r[3] for r in rows]
print("  first 12 sent:", " ".join(p.split("/")[2][0] for p in paths[:12]))
ok = len(paths) == 50 and len(set(paths)) == 50
ok = ok and sum("/o/interactive/" in p for p in paths[:11]) == 10
sys.exit(0 if ok else 1)
PY
finish
