#!/usr/bin/env bash
# Issue #32 in `stagger batch`: a job's priority, tenant and weight (JSONL
# fields; --priority/--tenant/--weight for the jobs that name none) reach
# the engine (the --log's attempt_start lines carry them), are stored with
# the job (a run stopped by SIGTERM and resumed sends the rest with them),
# are never sent upstream (serve's echo of the headers), and `batch
# report` shows the jobs and the admissions per class and tenant, in text
# and --json. A bad value is a bad line. No timing is asserted.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch batch_prio
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

serve_start main
M=$PORT
$PY - "$T/jobs.jsonl" "$M" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(40):
        j = {"id": "j%d" % i, "url": "http://127.0.0.1:%s/echo?job=%d" % (sys.argv[2], i)}
        if i % 4 == 0:
            j["priority"] = "interactive"
        elif i % 4 == 1:
            j.update(priority="batch", tenant="acme", weight=2)
        elif i % 4 == 2:
            j["tenant"] = "beta"
        f.write(json.dumps(j) + "\n")
    f.write(json.dumps({"id": "bad1", "url": "http://127.0.0.1:1/x", "priority": "urgent"}) + "\n")
    f.write(json.dumps({"id": "bad2", "url": "http://127.0.0.1:1/x", "tenant": "a b"}) + "\n")
PYEOF

# A first run stopped early by SIGTERM (at most a few jobs done), then the rest.
"$S" batch -j 2 --rate 10 --priority batch --tenant dflt --log "$T/run1.log" --out "$T/out" \
  "$T/jobs.jsonl" > "$T/run1.out" 2> "$T/run1.err" &
RUN=$!
wait_grep "$T/run1.log" attempt_start
kill -TERM "$RUN"; wait "$RUN" || true
"$S" batch -j 4 --priority batch --tenant dflt --log "$T/run2.log" --out "$T/out" \
  "$T/jobs.jsonl" > "$T/run2.out" 2> "$T/run2.err" || true
check "two bad lines named" sh -c "grep -q 'priority' '$T/run1.err' && grep -q 'tenant' '$T/run1.err'"

classes() {
  $PY - "$@" <<'PYEOF'
import json, sys
n = {}
for log in sys.argv[1:]:
    for l in open(log):
        e = json.loads(l)
        if e.get("event") == "attempt_start":
            k = "%s/%s" % (e.get("class"), e.get("tenant"))
            n[k] = n.get(k, 0) + 1
want = {"interactive/dflt": 10, "batch/acme": 10, "batch/beta": 10, "batch/dflt": 10}
print("sent by class/tenant: %s" % n)
# a job in flight at the SIGTERM (-j 2: at most 2) is sent again by the resumed run
ok = set(n) == set(want) and all(want[k] <= n[k] <= want[k] + 2 for k in want)
sys.exit(0 if ok and sum(n.values()) <= 42 else 1)
PYEOF
}
check "every job sent with its own class and tenant, else --priority/--tenant (both runs)" \
  classes "$T/run1.log" "$T/run2.log"
check "the resumed run sent jobs too (their class came from the database)" \
  grep -q attempt_start "$T/run2.log"
check "no Stagger-Priority or Stagger-Tenant header reached the server" \
  sh -c "! grep -rqi 'stagger-priority\|stagger-tenant' '$T/out'"
check "the echo shows the headers it got (the check above can see them)" \
  grep -rqi '"headers"' "$T/out"

expect_exit "report: exit 0" 0 "$S" batch report --db "$T/jobs.jsonl.stagger.db"
cp /tmp/stg_out.$$ "$T/report.txt"
check "report: jobs by class and tenant" grep -q "jobs by class and tenant" "$T/report.txt"
check "report: admitted by class and tenant" grep -q "admitted by class and tenant" "$T/report.txt"
expect_exit "report --json: exit 0" 0 "$S" batch report --json --db "$T/jobs.jsonl.stagger.db"
jcheck "report --json: 10 done interactive jobs, 10 batch/acme, and admissions of batch/dflt" \
  "$(cat /tmp/stg_out.$$)" \
  'any(c["class"] == "interactive" and c.get("jobs", {}).get("done") == 10 for c in j["classes"]) and any(c["class"] == "batch" and c["tenant"] == "acme" and c.get("jobs", {}).get("done") == 10 for c in j["classes"]) and sum(c.get("admitted", 0) for c in j["classes"] if c["class"] == "batch" and c["tenant"] == "dflt") >= 10'
finish
