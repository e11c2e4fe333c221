#!/usr/bin/env bash
# The live page (issue #36) in headless Chromium (page_probe.py, through
# chromedriver's WebDriver API): `stagger proxy`'s /__stagger/ while
# requests go through it to a `stagger serve --rate 5` that answers 429s,
# and `stagger batch --metrics-listen`'s / while a batch runs against it.
# Each page loads with nothing from outside the machine (Chromium resolves
# no name but 127.0.0.1; every load is the page's own, none failed), its
# charts draw the expected series and move between two looks (new points,
# values that are not zero; per quota key too: the answers admitted and
# refused of the sends that spent it), the batch's progress moves, and a screenshot
# of each is kept (live-proxy.png, live-batch.png in $STG_ARTIFACTS, by
# default ./artifacts). Then the batch's `report --html` file, opened as
# file://: it loads nothing but itself and its charts draw (report.png). Skipped (77) without chromium and chromedriver
# (scripts/deps.sh installs them) or without the page (a build without
# libjs-chart.js). Every wait ends at an event (a poll, a line); the
# batch's 240 jobs, 120 to each of two servers at 5/s, last at least 20 s
# by the servers' buckets, longer than the page needs to be seen moving.
. "$(dirname "$0")/lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
[ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ] ||
  skip "skipped: chromium and chromium-driver are not installed (scripts/deps.sh)"
scratch live_page
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
ART=${STG_ARTIFACTS:-$PWD/artifacts}
mkdir -p "$ART"
export CHROMIUM CHROMEDRIVER
probe() { $PY "$(dirname "$0")/page_probe.py" "$@"; }

# Two upstreams: one that only answers 429s past its rate (a rate to
# learn, retries), one that announces its quota (X-RateLimit-*).
serve_start qup --rate 5 --ratelimit-headers
QURL=$URL
serve_start up --rate 5
proxy_start px --upstream "$URL" --route "/q=$QURL"
code=$(curl -s -o "$T/page.html" -w '%{http_code}' "$PX/__stagger/")
[ "$code" = 404 ] && skip "skipped: built without the live page (libjs-chart.js missing)"
check "proxy: the page is served (got $code)" [ "$code" = 200 ]
check "  and holds no address of elsewhere" sh -c '! grep -Eq "(src|href)=\"(https?:)?//" "$1"' _ "$T/page.html"
code=$(curl -s -o /dev/null -w '%{http_code}' "$PX/__stagger/chart.js")
check "proxy: chart.js from the binary (got $code)" [ "$code" = 200 ]
jcheck "proxy: live.json" "$(curl -s "$PX/__stagger/live.json")" \
  'j["kind"] == "proxy" and "waits" in j["metrics"] and "hosts" in j["metrics"]'

# Requests through the proxy for as long as the page is looked at.
( while :; do
    for i in 1 2 3 4 5 6 7 8; do
      curl -s -o /dev/null "$PX/load/$i" & curl -s -o /dev/null "$PX/q/load/$i" &
    done
    wait
  done ) &
LOAD=$!
rc=0
probe "$PX/__stagger/?interval=500" "$ART/live-proxy.png" --live \
  --expect "c_rate=admitted,c_rate=refused,c_wait=on the wire,c_learn=rate,c_retry=retry,c_quota=reserved,c_keyrate=admitted,c_keyrate=refused" \
  > "$T/proxy.json" 2> "$T/proxy.err" || rc=$?
kill "$LOAD" 2>/dev/null; wait "$LOAD" 2>/dev/null || true
# Per quota key: the answers to the sends that spent it (stg_quota_tally),
# never more than the attempts made.
jcheck "proxy: live.json counts answers per quota key" "$(curl -s "$PX/__stagger/live.json")" \
  'any(q["admitted"] > 0 for q in j["metrics"]["quotas"]) and all(q["admitted"] + q["refused"] <= sum(sum(h["attempts"].values()) for h in j["metrics"]["hosts"].values()) for q in j["metrics"]["quotas"])'
check "proxy page: no load from elsewhere, charts drawn and moving ($(tail -1 "$T/proxy.err"))" [ "$rc" = 0 ]
check "proxy page: screenshot kept ($ART/live-proxy.png)" test -s "$ART/live-proxy.png"
proxy_stop

# ---- the batch's page ------------------------------------------------------------
for i in $(seq 120); do echo "$URL/job/$i"; echo "$QURL/job/$i"; done > "$T/jobs.txt"
"$STAGGER" batch -q --metrics-listen 0 "$T/jobs.txt" > "$T/b.out" 2> "$T/b.err" &
BPID=$!
for _ in $(seq 600); do
  BP=$(sed -n 's|.*live page on http://127\.0\.0\.1:\([0-9]*\)/$|\1|p' "$T/b.err")
  [ -n "$BP" ] && break
  kill -0 "$BPID" 2>/dev/null || break
  sleep 0.05
done
check "batch: the live page's address printed" test -n "$BP"
jcheck "batch: live.json has the jobs" "$(curl -s "http://127.0.0.1:$BP/live.json")" \
  'j["kind"] == "batch" and j["batch"]["total"] == 240'
rc=0
probe "http://127.0.0.1:$BP/?interval=500" "$ART/live-batch.png" --live \
  --expect "c_rate=admitted,c_wait=on the wire,c_learn=rate,c_quota=remaining,c_keyrate=admitted,c_keyrate=refused" \
  > "$T/batch.json" 2> "$T/batch.err" || rc=$?
check "batch page: no load from elsewhere, charts and progress moving ($(tail -1 "$T/batch.err"))" [ "$rc" = 0 ]
check "batch page: screenshot kept ($ART/live-batch.png)" test -s "$ART/live-batch.png"
alive=no; kill -0 "$BPID" 2>/dev/null && alive=yes
check "batch: still running after the looks (the page saw it run)" test "$alive" = yes
kill -TERM "$BPID" 2>/dev/null; wait "$BPID" 2>/dev/null || true

# ---- the HTML report of that batch, opened as a file ---------------------------
"$STAGGER" batch report --html "$T/report.html" "$T/jobs.txt" > /dev/null || fail "report --html"
rc=0
probe "file://$T/report.html" "$ART/report.png" \
  --expect "c_status=2xx,c_flow=claimed,c_inflight=in flight,c_dur=jobs,c_waits=,c_learned=attempts/s,c_learned=learned rate" \
  > "$T/report.json" 2> "$T/report.err" || rc=$?
check "report file: nothing loaded but itself, its charts drawn ($(tail -1 "$T/report.err"))" [ "$rc" = 0 ]
check "report file: screenshot kept ($ART/report.png)" test -s "$ART/report.png"
finish
