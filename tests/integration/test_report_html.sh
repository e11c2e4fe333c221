#!/usr/bin/env bash
# stagger batch report --html FILE (issue #36, part 2): after a batch that
# met 429s, one file with everything in it: Chart.js inline (no script or
# style fetched from anywhere: no src=, no href= to elsewhere), the report's
# data (the timeline the database holds: jobs finished by status, claimed,
# retries, in flight, durations), the text report; no job URL in it; the
# usual report still on stdout; a file that cannot be written is exit 1.
# The per-second series the run recorded (store/series.c) is in it and
# holds the run's figures: its attempts are the report's calls, its 429s
# the report's, its waits add up to the report's time lost waiting, the
# learned rate (the 429s turned the adaptive rate on) is there; a second
# batch with --rate waited for its limiter, and its series says so.
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
grep -q 'needs a build with Chart.js' "$T/r.err" && skip "skipped: built without libjs-chart.js"
check "report --html: exit 0 (got $rc: $(cat "$T/r.err"))" [ "$rc" = 0 ]
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
# The series against the report of the same database (--json: its totals).
series_check() { # html report.json what
  $PY - "$@" <<'PYEOF'
import json, re, sys
h = open(sys.argv[1]).read()
m = re.search(r'<script id="data" type="application/json">(.*?)</script>', h, re.S)
t = json.loads(m.group(1))["timeline"]
r = json.load(open(sys.argv[2]))
what = sys.argv[3]
n = t["buckets"]
for k in ("attempts", "status_429", "status_503", "learned_rate", "concurrency"):
    assert len(t[k]) == n, (k, len(t[k]), n)
w = t["waits_ms"]
assert sorted(w) == sorted(["slot", "limiter", "quota", "pace", "concurrency", "breaker",
                            "backoff", "budget"]), sorted(w)
assert all(len(a) == n for a in w.values())
assert sum(t["attempts"]) == r["calls"], (sum(t["attempts"]), r["calls"])
assert sum(t["status_429"]) == r["status_429"], (sum(t["status_429"]), r["status_429"])
retry = sum(sum(w[k]) for k in ("backoff", "budget", "breaker"))
lim = sum(sum(w[k]) for k in ("limiter", "quota", "pace"))
ws = r["waiting"]
# The report keeps whole ms of each run's sum; the series exact us.
assert abs(retry - ws["retry_ms"]) <= 1, (retry, ws)
assert abs(lim - ws["limiter_ms"]) <= 1, (lim, ws)
if what == "429s":
    assert r["status_429"] > 0 and any(v for v in t["learned_rate"]), t["learned_rate"]
if what == "rate":
    assert sum(w["limiter"]) > 100, sum(w["limiter"])  # 15 jobs at 10/s, burst 1: ~1.4 s
print("ok: series of %s: %d attempts, %d 429s, waits retry %.1f ms limiter %.1f ms" %
      (what, sum(t["attempts"]), sum(t["status_429"]), retry, lim))
PYEOF
}
"$STAGGER" batch report --json "$T/jobs.txt" > "$T/r.json" || fail "report --json"
out=$(series_check "$T/r.html" "$T/r.json" 429s 2>&1) || true
echo "$out"
check "the per-second series holds the run's figures: $out" [ "${out#ok:}" != "$out" ]
serve_start up2
for i in $(seq 15); do echo "$URL/job/$i"; done > "$T/jobs2.txt"
"$STAGGER" batch -q --rate 10 --burst 1 "$T/jobs2.txt" || fail "batch --rate"
"$STAGGER" batch report --html "$T/r2.html" "$T/jobs2.txt" > /dev/null || fail "report 2"
"$STAGGER" batch report --json "$T/jobs2.txt" > "$T/r2.json" || fail "report 2 --json"
out=$(series_check "$T/r2.html" "$T/r2.json" rate 2>&1) || true
echo "$out"
check "with --rate, the series shows the limiter's waits: $out" [ "${out#ok:}" != "$out" ]
rc=0
"$STAGGER" batch report --html "$T/no/such/dir/r.html" "$T/jobs.txt" > /dev/null 2> "$T/bad.err" || rc=$?
check "a file that cannot be written: exit 1 (got $rc)" [ "$rc" = 1 ]
check "  saying where" grep -q -- '--html' "$T/bad.err"
finish
