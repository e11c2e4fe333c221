# `batch export` and `batch export --queue` of the same jobs, and `batch
# report` and `batch report --queue` of them (last section). Export: the same
# columns in the same order and the same formats (JSONL, JSON, CSV with
# CRLF line ends and RFC 4180 quoting, finished_at ISO 8601, line,
# duration_ms, bodies as text or base64), the queue adding only its own
# columns (deliveries, worker, latency_ms). One input, run once into a
# database and once through a queue on a redis-server of the test's own,
# against one upstream whose bodies hold commas, quotes, newlines and
# binary bytes (a NUL before a comma). Only 127.0.0.1 is used.
#
# Checks are on the files written, never on time: the values that depend
# on the run (finished_at, duration_ms) are compared by their form.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
[ -n "${STG_HAVE_REDIS:-}" ] || skip "skipped: stagger is built without the Redis queue"
command -v redis-server >/dev/null || skip "skipped: no redis-server"
scratch xsame
. "$(dirname "$0")/queue_lib.sh"
RPORT=$(free_port)
start_redis
py_upstream bytes_upstream.py
U="http://127.0.0.1:$UPPORT"
{
  echo "# the same jobs for both back ends"
  echo "$U/text/1"
  echo "$U/bin/2"
  echo
  echo "$U/gone/3"
  echo "$U/text/4"
} >"$T/in.txt"

rc=0
"$S" batch -q --progress none --rate 0 --db "$T/jobs.db" "$T/in.txt" >/dev/null 2>"$T/db.err" || rc=$?
check "the database run ends 1 (one 404): $rc $(cat "$T/db.err")" [ "$rc" = 1 ]
rc=0
"$S" batch -q --progress none --rate 0 --queue "redis://127.0.0.1:$RPORT/same" --worker w1 \
  "$T/in.txt" >/dev/null 2>"$T/q.err" || rc=$?
check "the queue run ends 1 (one 404): $rc $(cat "$T/q.err")" [ "$rc" = 1 ]

for f in jsonl json csv; do
  "$S" batch export --db "$T/jobs.db" --bodies --format $f -o "$T/db.$f"
  "$S" batch export --queue "redis://127.0.0.1:$RPORT/same" --bodies --format $f -o "$T/q.$f"
done

check "the same rows, columns, order and values but the queue's own and the run's times" \
  python3 - "$T" <<'PY'
import csv, io, json, re, sys
T = sys.argv[1]
OWN = ["deliveries", "worker", "latency_ms"]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
def same(db, q, what):
    ok = True
    if len(db) != len(q) or len(db) != 4:
        print(f"  {what}: {len(db)} rows vs {len(q)}"); return False
    for a, b in zip(db, q):
        ka, kb = list(a), [k for k in b if k not in OWN]
        if ka != kb or [k for k in b if k in OWN] != OWN:
            print(f"  {what}: columns {ka} vs {list(b)}"); ok = False
        for k in ka:
            va, vb = a[k], b[k]
            if k == "finished_at":
                good = bool(ISO.match(str(va))) and bool(ISO.match(str(vb)))
            elif k == "duration_ms":
                good = str(va).isdigit() and str(vb).isdigit()
            else:
                good = va == vb
            if not good:
                print(f"  {what}: job {a.get('id')} {k}: {va!r} vs {vb!r}"); ok = False
    return ok
def lines(p): return [json.loads(l, object_pairs_hook=dict) for l in open(p)]
ok = same(lines(f"{T}/db.jsonl"), lines(f"{T}/q.jsonl"), "jsonl")
ok &= same(json.load(open(f"{T}/db.json")), json.load(open(f"{T}/q.json")), "json")
def rows(p):
    raw = open(p, "rb").read()
    return raw, list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline="")))
rdb, cdb = rows(f"{T}/db.csv")
rq, cq = rows(f"{T}/q.csv")
ok &= same(cdb, cq, "csv")
for name, raw in (("db", rdb), ("queue", rq)):
    # every line ends CRLF: the record count equals the CRLF count
    if raw.count(b"\r\n") != 5 or raw.replace(b"\r\n", b"").count(b"\n") != 2:
        print(f"  {name} csv: line ends {raw!r}"); ok = False
# A URL list's job is named after its line: 2 text, 3 binary, 5 the 404, 6 text.
by = {r["id"]: r for r in lines(f"{T}/q.jsonl")}
ok &= by["3"].get("body_base64") == "ACxiaW4y//4B" and "body" not in by["3"]
ok &= by["2"]["body"] == 'text 1, "quoted"\nsecond line' and by["2"]["line"] == 2
ok &= by["6"]["line"] == 6 and by["5"]["status"] == 404 and by["5"]["state"] == "failed"
cby = {r["id"]: r for r in cq}
ok &= cby["3"]["body"] == "base64:ACxiaW4y//4B" and cby["2"]["line"] == "2"
sys.exit(0 if ok else 1)
PY

# `batch report` of both, text and --json: one printer (src/batch/report.c)
# says the common facts the same way for both back ends: the jobs by
# state, the calls with their 429s and 503s, the number of jobs timed (the
# durations' values depend on the run), the job set's fingerprint and the
# class sections agree, member for member and line for line; each report
# adds only its own sections (the database its runs, the queue its
# workers).
"$S" batch report --db "$T/jobs.db" >"$T/db.txt"
"$S" batch report --db "$T/jobs.db" --json >"$T/db.json"
"$S" batch report --queue "redis://127.0.0.1:$RPORT/same" >"$T/q.txt"
"$S" batch report --queue "redis://127.0.0.1:$RPORT/same" --json >"$T/q.json"

check "--json: the common members agree, each side adds only its own" \
  python3 - "$T/db.json" "$T/q.json" <<'PY'
import json, sys
db, q = (json.load(open(p)) for p in sys.argv[1:3])
ok = True
for k in ["jobs", "ended", "states", "calls", "status_429", "status_503", "share_429",
          "fingerprint", "classes"]:
    if k not in db or k not in q or db[k] != q[k]:
        print(f"  {k}: {db.get(k)!r} vs {q.get(k)!r}"); ok = False
if db["jobs"] != 4 or db["ended"] != 4 or db["states"]["done"] != 3 or db["states"]["failed"] != 1:
    print(f"  the database's counts: {db}"); ok = False
if db["calls"] != 4:
    print(f"  calls: {db['calls']}"); ok = False
for j in (db, q):
    d = j.get("duration_ms") or {}
    if sorted(d) != ["jobs", "max", "p50", "p90", "p99"] or d["jobs"] != 4:
        print(f"  duration_ms: {d}"); ok = False
if "workers" in db or "queue" in db or "runs" not in db:
    print(f"  the database's own: {sorted(db)}"); ok = False
if "runs" in q or "retries" in q or [w["name"] for w in q.get("workers", [])] != ["w1"]:
    print(f"  the queue's own: {sorted(q)}"); ok = False
sys.exit(0 if ok else 1)
PY

check "text: the common lines agree, each side adds only its own" \
  python3 - "$T/db.txt" "$T/q.txt" <<'PY'
import re, sys
db, q = (open(p).read().splitlines() for p in sys.argv[1:3])
ok = True
def states(lines):   # "  done  3   note": the label and the count
    return [l.split()[:2] if not l.startswith("  in flight") else l.split()[:3]
            for l in lines[1:7]]
if states(db) != states(q):
    print(f"  states: {states(db)} vs {states(q)}"); ok = False
def line(lines, start):
    m = [l for l in lines if l.startswith(start)]
    return m[0] if m else None
cdb, cq = line(db, "calls "), line(q, "calls ")
if not cdb or not cq or cdb.split(";")[0] != cq or "; retries" not in cdb:
    print(f"  calls: {cdb!r} vs {cq!r}"); ok = False
ddb, dq = line(db, "job duration "), line(q, "job duration ")
if not ddb or not dq or not ddb.endswith("(4 jobs)") or not dq.endswith("(4 jobs)"):
    print(f"  durations: {ddb!r} vs {dq!r}"); ok = False
if not line(db, "runs 1,") or line(db, "workers"):
    print("  the database's own sections"); ok = False
if line(q, "runs ") or line(q, "workers: 1") is None or line(q, "  w1: done 3, failed 1") is None:
    print("  the queue's own sections"); ok = False
if not re.match(r"^queue redis://127\.0\.0\.1:\d+/same: 4 jobs", q[0]) or not db[0].startswith("batch "):
    print(f"  heads: {db[0]!r} / {q[0]!r}"); ok = False
sys.exit(0 if ok else 1)
PY
finish
