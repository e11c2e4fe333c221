#!/usr/bin/env bash
# The metrics of every command pass Prometheus's own linter, `promtool
# check metrics` (Debian's prometheus package), and the Grafana dashboard
# in the tree (docs/grafana/stagger.json) names only metrics stagger
# exports (issue #36, part 3). The metrics are taken after some 429s and
# retries, so the labelled series are there too: stagger fetch --metrics,
# stagger batch --metrics, stagger proxy's /__stagger/metrics and stagger
# serve's /metrics. Skipped (77) without promtool (scripts/deps.sh installs
# prometheus).
. "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null ||
  skip "skipped: promtool is not installed (Debian's prometheus package, scripts/deps.sh)"
scratch promtool
. "$(dirname "$0")/proxy_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
DASH="$(dirname "$0")/../../docs/grafana/stagger.json"

serve_start up --rate 5
# fetch: a burst beside it makes its request meet a 429 and wait
for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null "$URL/burst/$i"; done
"$STAGGER" fetch -s -o /dev/null --metrics "$T/fetch.prom" "$URL/f" || fail "fetch"
for i in $(seq 20); do echo "$URL/job/$i"; done > "$T/jobs.txt"
"$STAGGER" batch -q --metrics "$T/batch.prom" "$T/jobs.txt" || fail "batch"
# the proxy in front of a server announcing its quota (X-RateLimit-*)
serve_start qup --rate 5 --ratelimit-headers
proxy_start px --upstream "$URL"
pids=""
for i in $(seq 12); do curl -s -o /dev/null "$PX/p/$i" & pids="$pids $!"; done
wait $pids
curl -s "$PX/__stagger/metrics" > "$T/proxy.prom"
curl -s "$URL/metrics" > "$T/serve.prom"
proxy_stop

for c in fetch batch proxy serve; do
  check "$c: metrics present" grep -q '^# TYPE stagger_' "$T/$c.prom"
  check "$c: promtool check metrics ($(promtool check metrics < "$T/$c.prom" 2>&1 | head -3 | tr '\n' ' '))" \
    sh -c 'promtool check metrics < "$1"' _ "$T/$c.prom"
done
check "the quotas were there to be checked" grep -q '^stagger_quota_limit{' "$T/proxy.prom"
check "  with the answers per quota key" grep -Eq '^stagger_quota_answers_total\{.*outcome="admitted"\} [1-9]' "$T/proxy.prom"
check "the retries and waits were there to be checked" \
  grep -q '^stagger_retries_total{reason="retry_status",cause="429"}' "$T/batch.prom"

# The dashboard: every stagger_* name in a query is a family one of them
# exports (a histogram's _bucket, _sum and _count included).
rc=0
out=$($PY - "$DASH" "$T"/fetch.prom "$T"/batch.prom "$T"/proxy.prom "$T"/serve.prom <<'PYEOF'
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
have = set()
for f in sys.argv[2:]:
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", open(f).read(), re.M):
        have.add(m.group(1))
        if m.group(2) == "histogram":
            have.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
used = sorted({n for e in exprs for n in re.findall(r"\bstagger_[a-z0-9_]+", e)})
missing = [n for n in used if n not in have]
print("%d queries, %d names, missing: %s" % (len(exprs), len(used), missing))
sys.exit(1 if missing or not exprs else 0)
PYEOF
) || rc=$?
check "dashboard: its queries name only metrics that exist ($out)" [ "$rc" = 0 ]
finish
