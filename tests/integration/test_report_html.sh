#!/usr/bin/env bash
# stagger batch report --html FILE (issue #36, part 2): after a batch that
# met 429s, one file with everything in it: Chart.js inline (no script or
# style fetched from anywhere: no src=, no href= to elsewhere), the report's
# data (the timeline the database holds: jobs finished by status, claimed,
# retries, in flight, durations), the text report; no job URL in it; the
# usual report still on stdout; a file that cannot be written is exit 1.
# How it looks in Chromium is test_live_page.sh's.
. "$(dirname "$0")/lib.sh"
scratch report_html
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

serve_start up --rate 10
for i in $(seq 40); do echo "$URL/job/$i?token=sekrit$i"; done > "$T/jobs.txt"
"$STAGGER" batch -q "$T/jobs.txt" || fail "batch"
rc=0
"$STAGGER" batch report --html "$T/r.html" "$T/jobs.txt" > "$T/r.txt" 2> "$T/r.err" || rc=$?
check "report --html: exit 0 (got $rc: $(cat "$T/r.err"))" [ "$rc" = 0 ]
[ "$rc" = 77 ] && exit 77
grep -q 'built with Chart.js\|needs a build' "$T/r.err" && skip "skipped: built without libjs-chart.js"
check "the text report still on stdout" grep -q '^  done  *40' "$T/r.txt"
check "one file, Chart.js inline" grep -q 'Chart.js v[0-9]' "$T/r.html"
check "nothing fetched: no src= or href= anywhere" sh -c '! grep -Eiq "(src|href)=" "$1"' _ "$T/r.html"
check "no job URL, no secret" sh -c '! grep -Eq "/job/|sekrit" "$1"' _ "$T/r.html"
$PY - "$T/r.html" > "$T/data.txt" 2>&1 <<'PYEOF' || fail "data: $(cat "$T/data.txt")"
import json, re, sys
h = open(sys.argv[1]).read()
m = re.search(r'<script id="data" type="application/json">(.*?)</script>', h, re.S)
d = json.loads(m.group(1))
t = d["timeline"]
fin = sum(sum(a) for a in t["finished"].values())
assert fin == 40, fin
assert sum(t["claimed"]) == 40
assert sum(x["n"] for x in t["durations"]) == 40
assert sum(t["retries"]) == d["report"]["retries"], (sum(t["retries"]), d["report"]["retries"])
assert d["report"]["jobs"] == 40 and "done" in d["text"]
assert len(t["in_flight"]) == t["buckets"] and max(t["in_flight"]) > 0
print("ok: %d buckets of %d ms, %d retries" % (t["buckets"], t["bucket_ms"], sum(t["retries"])))
PYEOF
cat "$T/data.txt"
rc=0
"$STAGGER" batch report --html "$T/no/such/dir/r.html" "$T/jobs.txt" > /dev/null 2> "$T/bad.err" || rc=$?
check "a file that cannot be written: exit 1 (got $rc)" [ "$rc" = 1 ]
check "  saying where" grep -q -- '--html' "$T/bad.err"
finish
