#!/usr/bin/env bash
# Every wait accounted for (issue #36, part 0): through stagger proxy in
# front of a `stagger serve --rate 5` that answers 429s, a burst and then
# sequential requests; the proxy's log then holds, for every request, its
# whole time (the proxy's line), its attempts' time upstream (attempt_end)
# and its waits (waited events, by what for). The parts must add up to the
# whole: sum(waits) + sum(upstream) = sum(whole), up to what neither part
# can hold: per request, the hand-over between the proxy's front and the
# engine's loop and back, and per attempt, the loop pass in which the
# engine reads an answer libcurl has finished. Each is a pass of the one
# loop thread; the bound gives each one 25 ms (a pass of the loop under
# ASan on a loaded 2-core machine), plus 2% of the whole, so a miss of
# seconds (before: the limiter's 0.12 s of 4 s waited) cannot pass. The
# metrics must say the same as the log: stagger_wait_seconds' sums are the
# waited events' sums, and the proxy's request histogram counts each
# request once.
. "$(dirname "$0")/lib.sh"
scratch proxy_waits
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

serve_start up --rate 5
proxy_start px --upstream "$URL" --log "$T/px.log"
pids=""
for i in $(seq 16); do curl -s -o /dev/null "$PX/burst/$i" & pids="$pids $!"; done
wait $pids
for i in $(seq 6); do curl -s -o /dev/null "$PX/seq/$i"; done
curl -s "$PX/__stagger/metrics" > "$T/m.prom"
proxy_stop # (its log is whole once it exited)

check "some 429s were met (else nothing waited)" grep -q '"status":429' "$T/px.log"
rc=0
$PY - "$T/px.log" "$T/m.prom" > "$T/sums" 2>&1 <<'PYEOF' || rc=$?
import json, re, sys
whole = upstream = waits = 0.0
n_req = n_att = 0
by = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    e = j.get("event")
    if e == "proxy" and j["reason"] != "admin":
        whole += j["duration_ms"]; n_req += 1
    elif e == "attempt_end":
        upstream += j["duration_ms"]; n_att += 1
    elif e == "waited":
        waits += j["wait_ms"]; by[j["waited_for"]] = by.get(j["waited_for"], 0) + j["wait_ms"]
bound = 25.0 * (n_req + n_att) + 0.02 * whole
gap = whole - upstream - waits
print("requests %d attempts %d whole %.1f ms upstream %.1f ms waits %.1f ms gap %.1f ms bound %.1f ms"
      % (n_req, n_att, whole, upstream, waits, gap, bound))
print("by reason:", {k: round(v, 1) for k, v in sorted(by.items())})
m = open(sys.argv[2]).read()
msum = sum(float(v) for v in re.findall(r'^stagger_wait_seconds_sum\{reason="[a-z]+"\} (\S+)$', m, re.M))
hcount = int(re.search(r'^stagger_proxy_request_duration_seconds_count (\d+)$', m, re.M).group(1))
print("metrics: wait sum %.1f ms, proxy request count %d" % (msum * 1000, hcount))
ok = abs(gap) <= bound and waits > 0
ok = ok and abs(msum * 1000 - waits) <= 0.01 * len(by) + 1 + 0.001 * waits
ok = ok and hcount == n_req
sys.exit(0 if ok else 1)
PYEOF
cat "$T/sums"
check "waits + upstream = the requests' whole time, and the metrics agree" [ "$rc" = 0 ]
finish
