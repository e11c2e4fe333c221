# Live metrics, parsed by a real Prometheus text parser (Debian's
# python3-prometheus-client, run with /usr/bin/python3): `stagger serve`'s
# /metrics, `stagger batch --metrics FILE --metrics-interval D
# --metrics-listen`, `stagger fetch --metrics-listen`; every file and page
# parses, counts match what was sent, and fetch and batch use one set of
# names (the stagger_* of src/curl/metrics.c).
. "$(dirname "$0")/lib.sh"
S=$STAGGER
scratch metrics
SRV_PIDS=""
. "$(dirname "$0")/batch_lib.sh"
PY=/usr/bin/python3
if ! $PY -c 'import prometheus_client.parser' 2>/dev/null; then
  echo "FAIL: python3-prometheus-client is missing (scripts/deps.sh installs it)" >&2
  exit 1
fi

# prom NAME FILE EXPR: FILE parses as Prometheus text; EXPR over
# v(name, **labels) (a sample's value, None if absent) and names (the
# families) is true.
prom() {
  TESTS_RUN=$((TESTS_RUN + 1))
  if ! $PY - "$2" "$3" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = list(text_string_to_metric_families(open(sys.argv[1]).read()))
names = {f.name for f in fams}
def v(name, **labels):
    for f in fams:
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == x for k, x in labels.items()):
                return s.value
    return None
ok = eval(sys.argv[2])
if not ok:
    print("false:", sys.argv[2], "names:", sorted(names), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
  then fail "$1"; fi
}

# metrics_port FILE PID: the port of "metrics on http://127.0.0.1:PORT/metrics"
# in FILE (a 30 s hang guard, not a timing bound: it ends at the line).
metrics_port() {
  for _ in $(seq 600); do
    _mp=$(sed -n 's|.*metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$1")
    [ -n "$_mp" ] && { echo "$_mp"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
}

# ---- stagger serve: /metrics beside /__stats --------------------------------
serve_start main
M=$PORT
for i in $(seq 1 12); do curl -s -o /dev/null "http://127.0.0.1:$M/x/$i"; done
curl -s -o /dev/null "http://127.0.0.1:$M/status/404"
curl -s -D "$T/srv.h" -o "$T/srv.prom" "http://127.0.0.1:$M/metrics"
check "serve /metrics: text/plain 0.0.4" grep -qi '^content-type: text/plain; version=0.0.4' "$T/srv.h"
prom "serve /metrics: 13 requests, 12 x 200, 1 x 404, /metrics not counted" "$T/srv.prom" \
  'v("stagger_server_requests_total") == 13 and v("stagger_server_responses_total", code="200") == 12 and v("stagger_server_responses_total", code="404") == 1 and v("stagger_server_outcomes_total", outcome="admitted") == 13'
curl -s "http://127.0.0.1:$M/__stats" >"$T/srv.json"
jcheck "serve /__stats agrees" "$(cat "$T/srv.json")" 'j["total"] == 13'

# ---- stagger batch: the file rewritten during the run, /metrics served ------
# 25 jobs at --rate 5 (burst 5): at least 4 s by the bucket, so the run is
# still going when the first rewrites (every 200ms) and a scrape happen.
for i in $(seq 1 25); do echo "http://127.0.0.1:$M/b/$i"; done >"$T/b.txt"
"$S" batch -q --rate 5 --metrics "$T/b.prom" --metrics-interval 200ms --metrics-listen 0 \
  "$T/b.txt" >"$T/b.out" 2>"$T/b.err" &
bpid=$!
mp=$(metrics_port "$T/b.err" "$bpid")
check "batch: listener address printed" test -n "$mp"
wait_db "$T/b.txt.stagger.db" "SELECT count(*) >= 8 FROM jobs WHERE state = 'done'" || true
curl -s -D "$T/bl.h" -o "$T/bl.prom" "http://127.0.0.1:$mp/metrics"
cp "$T/b.prom" "$T/b.mid.prom"
alive=no; kill -0 "$bpid" 2>/dev/null && alive=yes
check "batch: still running at the mid-run reads" test "$alive" = yes
prom "batch /metrics mid-run: some successes, not all" "$T/bl.prom" \
  'v("stagger_successes_total") is not None and 1 <= v("stagger_successes_total") < 25'
prom "batch --metrics file mid-run: rewritten with progress" "$T/b.mid.prom" \
  'v("stagger_successes_total") is not None and 1 <= v("stagger_successes_total") < 25'
check "batch /metrics: text/plain 0.0.4" grep -qi '^content-type: text/plain; version=0.0.4' "$T/bl.h"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mp/other" >"$T/bl.404"
check "batch listener: 404 elsewhere" grep -q 404 "$T/bl.404"
brc=0; wait "$bpid" || brc=$?
check "batch: exit 0 (got $brc)" test "$brc" = 0
prom "batch --metrics file at the end: 25 successes, 25 2xx attempts" "$T/b.prom" \
  'v("stagger_successes_total") == 25 and v("stagger_attempts_total", **{"class": "2xx"}) == 25'
check "batch: no tmp file left" sh -c '! ls "$1".tmp.* 2>/dev/null' _ "$T/b.prom"
check "batch: listener closed at the end" sh -c '! curl -s -m 2 "http://127.0.0.1:$1/metrics" >/dev/null' _ "$mp"
check "batch: nothing secret-looking in metrics" sh -c '! grep -q "/b/" "$1"' _ "$T/b.prom"

# ---- stagger fetch: /metrics while it waits out two 429s -----------------------
serve_start ff --fail-first 2 --fail-retry-after 1
F=$PORT
"$S" fetch -s -o /dev/null --metrics "$T/f.prom" --metrics-interval 200ms --metrics-listen 0 \
  "http://127.0.0.1:$F/f" 2>"$T/f.err" &
fpid=$!
fp=$(metrics_port "$T/f.err" "$fpid")
check "fetch: listener address printed" test -n "$fp"
curl -s -o "$T/fl.prom" "http://127.0.0.1:$fp/metrics"
# Two 429s with Retry-After 1 keep fetch waiting at least 2 s: the file is
# rewritten during the waits (polled until it shows the first 429, while
# fetch still runs; 10 s is a hang guard, not a bound).
seen=no
for _ in $(seq 200); do
  kill -0 "$fpid" 2>/dev/null || break
  if grep -q 'stagger_attempts_total{class="quota"} [12]$' "$T/f.prom" 2>/dev/null; then
    kill -0 "$fpid" 2>/dev/null && seen=yes
    break
  fi
  sleep 0.05
done
check "fetch --metrics-interval: the file shows a 429 while fetch still waits" test "$seen" = yes
frc=0; wait "$fpid" || frc=$?
check "fetch: exit 0 after two 429s (got $frc)" test "$frc" = 0
prom "fetch /metrics parses" "$T/fl.prom" '"stagger_attempts" in names'
prom "fetch --metrics file: 2 quota attempts, 1 success" "$T/f.prom" \
  'v("stagger_attempts_total", **{"class": "quota"}) == 2 and v("stagger_successes_total") == 1'
# one set of names: every family fetch writes, batch writes too, and batch
# adds only its jobs by state and the engine's admission per class and
# tenant (fetch's one call has no admission queue to order)
names() { $PY -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
print("\n".join(sorted(f.name for f in text_string_to_metric_families(open(sys.argv[1]).read()))))' "$1"; }
names "$T/f.prom" >"$T/f.names"
names "$T/b.prom" >"$T/b.names"
check "fetch and batch: the same metric names" test -z "$(comm -23 "$T/f.names" "$T/b.names")"
check "batch's own: its jobs by state, the classes' admission" test \
  "$(comm -13 "$T/f.names" "$T/b.names" | tr '\n' ' ')" = \
  "stagger_batch_jobs stagger_class_admitted stagger_class_wait_seconds stagger_class_waiting "
prom "batch: stagger_batch_jobs at the end: 25 done, none pending" "$T/b.prom" \
  'v("stagger_batch_jobs", state="done") == 25 and v("stagger_batch_jobs", state="pending") == 0'

serve_stop "$SRV_PID" || true
finish
