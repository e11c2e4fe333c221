# `batch export` and `batch export --queue` of the same jobs: the same
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
finish
